// canopy-run when ranks fail: the group is stopped, the failure reported, and (if asked) the group restarted.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/launcher/launcher_runner.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::testing {
namespace {

using std::chrono::seconds;

// The PID the probe's "env" step printed for `rank`, or -1.
pid_t pid_of_rank(const std::string& out, int rank) {
  auto env = environments_by_rank(out);
  auto pid = env[rank].find("PID");
  return pid == env[rank].end() ? -1 : static_cast<pid_t>(std::stol(pid->second));
}

TEST(CanopyRunFailure, AFailingRankStopsTheOthersAndItsStatusIsReported) {
  TempDir barrier;
  LauncherResult r = run_launcher(
      {"--nproc", "3", launcher_probe_path(), "env", "barrier:" + barrier.path(), "exit:3@1", "sleep:60"});
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  pid_t failed = pid_of_rank(r.out, 1);
  ASSERT_GT(failed, 0) << r.describe();
  EXPECT_EQ(count_of(r.err, fmt::format("canopy-run: rank 1 (pid {}) exited with status 3\n", failed)), 1)
      << r.describe();
  // The sleepers were terminated, not waited for: well under their 60 s.
  EXPECT_LT(r.elapsed, seconds(20)) << r.describe();
  for (int rank : {0, 2}) {
    pid_t pid = pid_of_rank(r.out, rank);
    ASSERT_GT(pid, 0) << r.describe();
    EXPECT_FALSE(process_exists(pid)) << "rank " << rank << " outlived canopy-run";
  }
  // Only the first failure is reported as one: the ranks stopped on purpose are not.
  EXPECT_EQ(count_of(r.err, "exited with status"), 1) << r.describe();
  EXPECT_EQ(count_of(r.err, "killed by signal"), 0) << r.describe();
}

TEST(CanopyRunFailure, ARankKilledByASignalIsReported) {
  TempDir barrier;
  LauncherResult r = run_launcher(
      {"--nproc", "2", launcher_probe_path(), "env", "barrier:" + barrier.path(), "kill:9@0", "sleep:60"});
  ASSERT_FALSE(r.timed_out) << r.describe();
  pid_t killed = pid_of_rank(r.out, 0);
  ASSERT_GT(killed, 0) << r.describe();
  EXPECT_EQ(
      count_of(r.err, fmt::format("canopy-run: rank 0 (pid {}) was killed by signal 9 (Killed)\n", killed)),
      1)
      << r.describe();
  EXPECT_EQ(r.exit_code, 128 + 9) << r.describe();
  pid_t survivor = pid_of_rank(r.out, 1);
  ASSERT_GT(survivor, 0) << r.describe();
  EXPECT_FALSE(process_exists(survivor));
}

TEST(CanopyRunFailure, ARankThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  TempDir barrier;
  LauncherResult r =
      run_launcher({"--nproc", "2", "--stop-grace", "0.5", launcher_probe_path(), "ignore-term", "env",
                    "barrier:" + barrier.path(), "exit:4@1", "sleep:60"});
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 4) << r.describe();
  EXPECT_LT(r.elapsed, seconds(20)) << r.describe();
  pid_t stubborn = pid_of_rank(r.out, 0);
  ASSERT_GT(stubborn, 0) << r.describe();
  EXPECT_FALSE(process_exists(stubborn));
}

TEST(CanopyRunFailure, RestartsTheWholeGroupWithTheNextRestartCount) {
  // Attempt 0: rank 1 fails. Attempt 1: everyone succeeds. The barrier makes rank 1 fail only after
  // rank 0 has printed its environment, which canopy-run would otherwise cut short.
  TempDir barrier;
  LauncherResult r = run_launcher({"--nproc", "2", "--max-restarts", "3", launcher_probe_path(), "env",
                                   "barrier:" + barrier.path(), "fail-before-restart:1@1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int rank : {0, 1}) {
    for (int attempt : {0, 1}) {
      EXPECT_EQ(count_of(r.out, fmt::format("[{}] CANOPY_RESTART_COUNT={}\n", rank, attempt)), 1)
          << r.describe();
      EXPECT_EQ(count_of(r.out, fmt::format("[{}] TORCHELASTIC_RESTART_COUNT={}\n", rank, attempt)), 1);
    }
    EXPECT_EQ(count_of(r.out, fmt::format("[{}] CANOPY_RESTART_COUNT=2\n", rank)), 0) << r.describe();
  }
  EXPECT_EQ(count_of(r.err, "canopy-run: restarting all ranks (restart 1 of 3)\n"), 1) << r.describe();
  // The store and its token stay the same for every attempt.
  std::string port_line = "[0] MASTER_PORT=" + environments_by_rank(r.out)[0]["MASTER_PORT"] + "\n";
  EXPECT_EQ(count_of(r.out, port_line), 2) << r.describe();
}

TEST(CanopyRunFailure, GivesUpAfterTheLastRestartWithTheRanksStatus) {
  LauncherResult r = run_launcher({"--max-restarts", "2", launcher_probe_path(), "env", "exit:5"});
  EXPECT_EQ(r.exit_code, 5) << r.describe();
  for (int attempt : {0, 1, 2}) {
    EXPECT_EQ(count_of(r.out, fmt::format("[0] CANOPY_RESTART_COUNT={}\n", attempt)), 1) << r.describe();
  }
  EXPECT_EQ(count_of(r.out, "CANOPY_RESTART_COUNT=3"), 0) << r.describe();
  EXPECT_EQ(count_of(r.err, "canopy-run: giving up after 2 restarts\n"), 1) << r.describe();
}

TEST(CanopyRunFailure, AProgramThatDoesNotExistIsNamedClearly) {
  LauncherResult by_path = run_launcher({"--nproc", "2", "/nonexistent/canopy-no-such-program"});
  EXPECT_EQ(by_path.exit_code, 127) << by_path.describe();
  EXPECT_EQ(by_path.err,
            "canopy-run: cannot run '/nonexistent/canopy-no-such-program': No such file or directory\n")
      << by_path.describe();

  LauncherResult by_name = run_launcher({"--max-restarts", "5", "canopy-no-such-program-in-path", "x"});
  EXPECT_EQ(by_name.exit_code, 127) << by_name.describe();
  EXPECT_EQ(by_name.err,
            "canopy-run: cannot run 'canopy-no-such-program-in-path': No such file or directory\n")
      << "a program that cannot run is not restarted: " << by_name.describe();
}

TEST(CanopyRunFailure, AFileThatIsNotExecutableIsNamedClearly) {
  TempDir dir;
  std::string path = dir.path() + "/not-executable";
  { std::ofstream(path) << "plain text\n"; }
  ::chmod(path.c_str(), 0644);
  LauncherResult r = run_launcher({path});
  EXPECT_EQ(r.exit_code, 126) << r.describe();
  EXPECT_EQ(r.err, fmt::format("canopy-run: cannot run '{}': Permission denied\n", path)) << r.describe();
}

TEST(CanopyRunFailure, BadFlagsAreUsageErrors) {
  LauncherResult r = run_launcher({"--nproc", "0", launcher_probe_path()});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--nproc"), std::string::npos) << r.describe();
  EXPECT_EQ(r.out, "");

  LauncherResult no_program = run_launcher({"--nproc", "2"});
  EXPECT_EQ(no_program.exit_code, 2) << no_program.describe();
  EXPECT_NE(no_program.err.find("no program given"), std::string::npos) << no_program.describe();
}

}  // namespace
}  // namespace canopy::testing
