// canopy-run --elastic over a real training program (examples/elastic_trainer.cpp): a rank SIGKILLed in
// the middle of the run, the survivors shrink and go on, canopy-run's replacement joins the group when the
// members grow, and every rank ends with the weights of a run without a failure.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <set>
#include <string>

#include "tests/launcher/launcher_runner.hpp"

namespace canopy::testing {
namespace {

using std::chrono::seconds;

std::string elastic_trainer_path() {
  return ELASTIC_TRAINER_PATH;
}

// Short deadlines: a join that is never admitted, or a peer that hangs, fails the test in seconds.
const std::map<std::string, std::string> kEnvironment{{"CANOPY_TIMEOUT", "20"}};

// The pid that slot `rank`'s first process printed ("[2] started pid 1234 as member at ..."), or -1.
pid_t member_pid(const std::string& out, int rank) {
  for (const std::string& line : lines_of(out)) {
    int slot = -1, pid = -1;
    if (std::sscanf(line.c_str(), "[%d] started pid %d as member", &slot, &pid) == 2 && slot == rank)
      return pid;
  }
  return -1;
}

// Waits until slot `rank` printed its step `step` in a group of `size`, then SIGKILLs that slot's first
// process; returns its pid (-1, with a test failure, where it never got there).
pid_t kill_after_step(LauncherProcess& run, int rank, int step, int size) {
  const std::string line = fmt::format("[{}] step {} rank {} size {} ", rank, step, rank, size);
  if (!run.wait_for_stdout(line, 1, seconds(30))) {
    ADD_FAILURE() << "no '" << line << "' within 30 s:\n" << run.out_so_far();
    return -1;
  }
  const pid_t victim = member_pid(run.out_so_far(), rank);
  EXPECT_GT(victim, 0) << run.out_so_far();
  if (victim > 0) {
    EXPECT_EQ(::kill(victim, SIGKILL), 0);
  }
  return victim;
}

struct FinalLine {
  std::string digest, expected;
};

// The "final step S digest D expected E" lines, one per process that finished training.
std::vector<FinalLine> final_lines(const std::string& out, int steps) {
  std::vector<FinalLine> finals;
  const std::string pattern = fmt::format("] final step {} digest %16s expected %16s", steps);
  for (const std::string& line : lines_of(out)) {
    const auto bracket = line.find(']');
    char digest[17] = {}, expected[17] = {};
    if (bracket != std::string::npos &&
        std::sscanf(line.c_str() + bracket, pattern.c_str(), digest, expected) == 2)
      finals.push_back({digest, expected});
  }
  return finals;
}

TEST(CanopyRunElasticTraining, AKilledRankIsReplacedAndEveryRankEndsWithTheFailureFreeWeights) {
  constexpr int kSteps = 100;  // 2 s: time enough, even on a loaded machine, for the replacement to join
  LauncherProcess run({"--nproc", "4", "--elastic", "3:4", "--max-restarts", "1", elastic_trainer_path(),
                       "--steps", std::to_string(kSteps), "--step-ms", "20"},
                      kEnvironment);
  const pid_t victim = kill_after_step(run, 2, 10, 4);
  ASSERT_GT(victim, 0);
  LauncherResult r = run.finish(seconds(60));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();

  EXPECT_EQ(
      count_of(r.err, fmt::format("canopy-run: rank 2 (pid {}) was killed by signal 9 (Killed)\n", victim)),
      1)
      << r.describe();
  EXPECT_EQ(count_of(r.err, "canopy-run: replaced rank 2 with pid "), 1) << r.describe();
  // Nobody else died or was stopped: the one death is the victim's.
  EXPECT_EQ(count_of(r.err, "killed by signal"), 1) << r.describe();
  EXPECT_EQ(count_of(r.err, "exited with status"), 0) << r.describe();
  EXPECT_EQ(count_of(r.err, "stopping the other ranks"), 0) << r.describe();
  for (int survivor : {0, 1, 3}) {
    EXPECT_EQ(count_of(r.out, fmt::format("[{}] shrunk to size 3", survivor)), 1) << r.describe();
    EXPECT_EQ(count_of(r.out, fmt::format("[{}] grew to size 4", survivor)), 1) << r.describe();
  }
  EXPECT_EQ(count_of(r.out, "[2] started pid "), 2) << r.describe();  // the victim, then its replacement
  EXPECT_EQ(count_of(r.out, "[2] joined as rank 3 of 4, restored step "), 1) << r.describe();

  // Three survivors and the replacement finished, each with the weights a failure-free run computes.
  const std::vector<FinalLine> finals = final_lines(r.out, kSteps);
  ASSERT_EQ(finals.size(), 4u) << r.describe();
  std::set<std::string> digests;
  for (const FinalLine& f : finals) {
    EXPECT_EQ(f.digest, f.expected) << r.describe();
    digests.insert(f.digest);
  }
  EXPECT_EQ(digests.size(), 1u) << r.describe();
}

TEST(CanopyRunElasticTraining, FewerThanMinLeftStopsTheJobWithAClearMessage) {
  LauncherProcess run({"--nproc", "3", "--elastic", "3:3", "--max-restarts", "2", elastic_trainer_path(),
                       "--steps", "100000", "--step-ms", "20"},
                      kEnvironment);
  const pid_t victim = kill_after_step(run, 1, 5, 3);
  ASSERT_GT(victim, 0);
  LauncherResult r = run.finish(seconds(30));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.describe();
  EXPECT_EQ(count_of(r.err,
                     "canopy-run: 2 ranks left (2 running, 0 finished), fewer than the 3 of --elastic 3:3: "
                     "stopping the other ranks\n"),
            1)
      << r.describe();
  EXPECT_EQ(count_of(r.err, "replaced rank"), 0) << r.describe();
  for (int survivor : {0, 2}) {
    const pid_t pid = member_pid(r.out, survivor);
    ASSERT_GT(pid, 0) << r.describe();
    EXPECT_FALSE(process_exists(pid)) << "rank " << survivor << " outlived canopy-run";
  }
}

// A replacement that nobody admits (the members never grow) is stopped by canopy-run once the members
// have finished, not left to wait out its CANOPY_TIMEOUT (20 s here): the job ends at once, and succeeds.
TEST(CanopyRunElasticTraining, AReplacementTheGroupNeverAdmitsIsStoppedWhenTheMembersFinish) {
  LauncherProcess run({"--nproc", "3", "--elastic", "2:3", "--max-restarts", "1", elastic_trainer_path(),
                       "--steps", "40", "--step-ms", "20", "--no-grow"},
                      kEnvironment);
  const pid_t victim = kill_after_step(run, 2, 5, 3);
  ASSERT_GT(victim, 0);
  LauncherResult r = run.finish(seconds(60));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(count_of(r.err, "canopy-run: replaced rank 2 with pid "), 1) << r.describe();
  EXPECT_EQ(count_of(r.err,
                     "canopy-run: the group has finished without admitting the replacement waiting to "
                     "join: stopping rank 2 (pid "),
            1)
      << r.describe();
  EXPECT_EQ(final_lines(r.out, 40).size(), 2u) << r.describe();  // ranks 0 and 1, in a group of two
  EXPECT_LT(r.elapsed, seconds(15)) << r.describe();             // not the replacement's 20 s timeout
}

// Where every member dies while a replacement waits, nobody is left to admit it: the job fails at once
// with the last death's status, rather than when the replacement's wait runs out.
TEST(CanopyRunElasticTraining, AReplacementLeftWithNoMemberToAdmitItEndsTheJob) {
  LauncherProcess run({"--nproc", "3", "--elastic", "1:3", "--max-restarts", "1", elastic_trainer_path(),
                       "--steps", "100000", "--step-ms", "20", "--no-grow"},
                      kEnvironment);
  ASSERT_GT(kill_after_step(run, 2, 5, 3), 0);
  ASSERT_TRUE(run.wait_for_stderr("canopy-run: replaced rank 2 with pid ", 1, seconds(30)))
      << run.out_so_far();
  for (int member : {0, 1}) {
    const pid_t pid = member_pid(run.out_so_far(), member);
    ASSERT_GT(pid, 0) << run.out_so_far();
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
  }
  LauncherResult r = run.finish(seconds(60));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.describe();
  EXPECT_EQ(count_of(r.err,
                     "canopy-run: no member of the group is left to admit the replacement waiting to "
                     "join: stopping rank 2 (pid "),
            1)
      << r.describe();
  EXPECT_LT(r.elapsed, seconds(15)) << r.describe();
}

}  // namespace
}  // namespace canopy::testing
