// canopy-run --elastic with the probe: a dead rank does not stop the others, a replacement starts in its
// slot while restarts remain, and the job fails only when fewer than MIN ranks are left.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/launcher/launcher_runner.hpp"

namespace canopy::testing {
namespace {

using std::chrono::seconds;

TEST(CanopyRunElastic, ADeadRankIsReplacedAndTheOthersGoOn) {
  // Rank 1 exits 1 at once; its replacement (CANOPY_RESTART_COUNT=1) does not. The others sleep a second
  // and then say "done": a stopped rank would never say it.
  LauncherResult r =
      run_launcher({"--nproc", "3", "--elastic", "2:3", "--max-restarts", "2", launcher_probe_path(), "env",
                    "fail-before-restart:1@1", "sleep:1", "stderr:done\n"});
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  auto env = environments_by_rank(r.out);  // rank 1's: the replacement's, printed last
  const std::string replacement_pid = env[1]["PID"];
  EXPECT_EQ(count_of(r.err, "exited with status 1\n"), 1) << r.describe();
  EXPECT_EQ(count_of(r.err, fmt::format("canopy-run: replaced rank 1 with pid {} (replacement 1 of "
                                        "--max-restarts 2); it joins the running group\n",
                                        replacement_pid)),
            1)
      << r.describe();
  EXPECT_EQ(count_of(r.err, "stopping the other ranks"), 0) << r.describe();
  for (int rank : {0, 1, 2}) EXPECT_EQ(count_of(r.err, fmt::format("[{}] done\n", rank)), 1) << r.describe();
  EXPECT_EQ(env[1]["CANOPY_ELASTIC_JOIN"], "1");
  EXPECT_EQ(env[1]["CANOPY_RESTART_COUNT"], "1");
  EXPECT_EQ(env[1]["TORCHELASTIC_RESTART_COUNT"], "1");
  EXPECT_EQ(env[1]["RANK"], "1");
  for (int rank : {0, 1, 2}) EXPECT_EQ(env[rank]["CANOPY_ELASTIC"], "2:3") << r.describe();
  for (int rank : {0, 2}) {
    EXPECT_EQ(env[rank]["CANOPY_ELASTIC_JOIN"], "") << r.describe();
    EXPECT_EQ(env[rank]["CANOPY_RESTART_COUNT"], "0") << r.describe();
  }
}

TEST(CanopyRunElastic, AReplacementThatDiesTooSpendsTheNextRestartThenTheGroupGoesOnSmaller) {
  // Rank 1 kills itself in every life: the first replacement dies like the rank it replaced, and with
  // --max-restarts 1 spent the group goes on with ranks 0 and 2, which finish: the job succeeds.
  LauncherResult r = run_launcher({"--nproc", "3", "--elastic", "2:3", "--max-restarts", "1",
                                   launcher_probe_path(), "kill:9@1", "sleep:1", "stderr:done\n"});
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(count_of(r.err, "was killed by signal 9 (Killed)\n"), 2) << r.describe();
  EXPECT_EQ(count_of(r.err, "(replacement 1 of --max-restarts 1)"), 1) << r.describe();
  EXPECT_EQ(count_of(r.err,
                     "canopy-run: rank 1 is not replaced: --max-restarts 1 is spent; 2 ranks go on "
                     "(--elastic 2:3)\n"),
            1)
      << r.describe();
  for (int rank : {0, 2}) EXPECT_EQ(count_of(r.err, fmt::format("[{}] done\n", rank)), 1) << r.describe();
}

TEST(CanopyRunElastic, FewerThanMinLeftFailsTheJobWithTheDeadRanksStatus) {
  // Restarts remain, but the survivors would have to go on with 2 ranks until a replacement joined,
  // and --elastic 3:3 forbids that.
  LauncherResult r = run_launcher({"--nproc", "3", "--elastic", "3:3", "--max-restarts", "5",
                                   launcher_probe_path(), "env", "sleep:0.3", "exit:7@2", "sleep:60"});
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 7) << r.describe();
  EXPECT_EQ(count_of(r.err,
                     "canopy-run: 2 ranks left (2 running, 0 finished), fewer than the 3 of --elastic 3:3: "
                     "stopping the other ranks\n"),
            1)
      << r.describe();
  EXPECT_EQ(count_of(r.err, "replaced rank"), 0) << r.describe();
  EXPECT_LT(r.elapsed, seconds(20)) << r.describe();  // the sleepers were stopped, not waited for
  auto env = environments_by_rank(r.out);
  for (int rank : {0, 1}) {
    ASSERT_FALSE(env[rank]["PID"].empty()) << r.describe();
    EXPECT_FALSE(process_exists(std::stoi(env[rank]["PID"]))) << "rank " << rank << " outlived canopy-run";
  }
}

}  // namespace
}  // namespace canopy::testing
