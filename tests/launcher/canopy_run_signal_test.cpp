// canopy-run asked to stop: the signal reaches every rank, nothing outlives it, and it exits 128 + signal.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <thread>

#include "tests/launcher/launcher_runner.hpp"

namespace canopy::testing {
namespace {

using std::chrono::seconds;

std::vector<pid_t> rank_pids(const std::string& out) {
  std::vector<pid_t> pids;
  for (auto& [rank, env] : environments_by_rank(out)) {
    if (env.count("PID") != 0) pids.push_back(static_cast<pid_t>(std::stol(env["PID"])));
  }
  return pids;
}

TEST(CanopyRunSignals, SigtermStopsEveryRank) {
  LauncherProcess launcher({"--nproc", "3", launcher_probe_path(), "env", "sleep:60"});
  ASSERT_TRUE(launcher.wait_for_stdout("PID=", 3, seconds(20))) << launcher.finish(seconds(1)).describe();
  ASSERT_EQ(::kill(launcher.pid(), SIGTERM), 0);
  LauncherResult r = launcher.finish(seconds(20));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.describe();
  auto pids = rank_pids(r.out);
  ASSERT_EQ(pids.size(), 3u) << r.describe();
  for (pid_t pid : pids) EXPECT_FALSE(process_exists(pid)) << "pid " << pid << " outlived canopy-run";
  EXPECT_NE(r.err.find("received SIGTERM"), std::string::npos) << r.describe();
  // Ranks ended by the stop request are not reported as failures.
  EXPECT_EQ(count_of(r.err, "killed by signal"), 0) << r.describe();
}

// However canopy-run ends, its ranks end with it: SIGKILL leaves it no chance to stop them, so each rank
// carries PR_SET_PDEATHSIG. This test process becomes the ranks' new parent (a subreaper) and reaps them.
TEST(CanopyRunSignals, RanksEndWhenCanopyRunIsKilled) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  LauncherProcess launcher({"--nproc", "3", launcher_probe_path(), "env", "sleep:60"});
  ASSERT_TRUE(launcher.wait_for_stdout("PID=", 3, seconds(20))) << launcher.finish(seconds(1)).describe();
  auto pids = rank_pids(launcher.out_so_far());
  ASSERT_EQ(pids.size(), 3u) << launcher.out_so_far();
  ASSERT_EQ(::kill(launcher.pid(), SIGKILL), 0);
  LauncherResult r = launcher.finish(seconds(5));
  EXPECT_EQ(r.signal, SIGKILL) << r.describe();
  auto limit = std::chrono::steady_clock::now() + seconds(3);
  for (pid_t pid : pids) {
    while (std::chrono::steady_clock::now() < limit && ::waitpid(pid, nullptr, WNOHANG) != pid)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_FALSE(process_exists(pid)) << "rank pid " << pid << " outlived a SIGKILLed canopy-run by 3 s";
    if (process_exists(pid)) ::kill(pid, SIGKILL);  // leave nothing behind even when failing
  }
}

TEST(CanopyRunSignals, SigintIsForwardedAsSigint) {
  LauncherProcess launcher({"--nproc", "2", launcher_probe_path(), "report-int", "env", "sleep:60"});
  ASSERT_TRUE(launcher.wait_for_stdout("PID=", 2, seconds(20))) << launcher.finish(seconds(1)).describe();
  ASSERT_EQ(::kill(launcher.pid(), SIGINT), 0);
  LauncherResult r = launcher.finish(seconds(20));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.describe();
  EXPECT_EQ(count_of(r.out, "[0] got SIGINT\n"), 1) << r.describe();
  EXPECT_EQ(count_of(r.out, "[1] got SIGINT\n"), 1) << r.describe();
}

TEST(CanopyRunSignals, RanksThatIgnoreTheStopRequestAreKilledAfterTheGrace) {
  LauncherProcess launcher(
      {"--nproc", "2", "--stop-grace", "0.5", launcher_probe_path(), "ignore-term", "env", "sleep:60"});
  ASSERT_TRUE(launcher.wait_for_stdout("PID=", 2, seconds(20))) << launcher.finish(seconds(1)).describe();
  ASSERT_EQ(::kill(launcher.pid(), SIGTERM), 0);
  LauncherResult r = launcher.finish(seconds(20));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.describe();
  for (pid_t pid : rank_pids(r.out)) EXPECT_FALSE(process_exists(pid));
}

TEST(CanopyRunSignals, AStopRequestIsNotFollowedByARestart) {
  LauncherProcess launcher({"--max-restarts", "3", launcher_probe_path(), "env", "sleep:60"});
  ASSERT_TRUE(launcher.wait_for_stdout("PID=", 1, seconds(20))) << launcher.finish(seconds(1)).describe();
  ASSERT_EQ(::kill(launcher.pid(), SIGTERM), 0);
  LauncherResult r = launcher.finish(seconds(20));
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.describe();
  EXPECT_EQ(count_of(r.out, "CANOPY_RESTART_COUNT=1"), 0) << r.describe();
}

TEST(CanopyRunSignals, NodeZeroWaitingForOtherNodesStopsWhenAsked) {
  // Node 0's ranks are done; node 1 never comes, so node 0 keeps the store up for it until told to stop.
  LauncherProcess node0({"--nnodes", "2", "--master-addr", "127.0.0.1", "--listen-addr", "127.0.0.1",
                         "--master-port", "0", launcher_probe_path(), "env"},
                        {{"CANOPY_JOB_TOKEN", "lonely-node"}, {"CANOPY_DEBUG", "INFO"}});
  ASSERT_TRUE(node0.wait_for_stderr(
      "keeping the store up until every other node is done with it (0 of 1 so far)", 1, seconds(20)))
      << node0.finish(seconds(1)).describe();
  ASSERT_EQ(::kill(node0.pid(), SIGTERM), 0);
  LauncherResult r = node0.finish(seconds(20));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << "its ranks succeeded: " << r.describe();
  EXPECT_NE(r.err.find("closing the store without waiting for the other nodes"), std::string::npos)
      << r.describe();
}

}  // namespace
}  // namespace canopy::testing
