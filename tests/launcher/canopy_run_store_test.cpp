// The store canopy-run hosts: ranks find it through the environment alone, and a restart gets a fresh round.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>

#include "tests/launcher/launcher_runner.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::testing {
namespace {

TEST(CanopyRunStore, RanksJoinThroughTheHostedStore) {
  // Leftovers of an outer job in the environment must not lead the ranks astray.
  LauncherResult r =
      run_launcher({"--nproc", "3", launcher_probe_path(), "rendezvous"}, {{"CANOPY_JOB_TOKEN", ""},
                                                                           {"CANOPY_MASTER_ADDR", "::1"},
                                                                           {"CANOPY_MASTER_PORT", "1"},
                                                                           {"RANK", "7"},
                                                                           {"WORLD_SIZE", "9"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(
        count_of(r.out, fmt::format("[{}] store rank={} world=3 count=3 hosted=by-launcher\n", rank, rank)),
        1)
        << r.describe();
  }
}

TEST(CanopyRunStore, ARestartedGroupMeetsInAFreshRound) {
  // Attempt 0: both ranks meet, then rank 1 fails. Attempt 1 meets again: a stale round would already hold
  // the claims and the count of attempt 0.
  TempDir barrier;
  LauncherResult r = run_launcher({"--nproc", "2", "--max-restarts", "1", launcher_probe_path(), "rendezvous",
                                   "barrier:" + barrier.path(), "fail-before-restart:1@1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int rank : {0, 1}) {
    EXPECT_EQ(
        count_of(r.out, fmt::format("[{}] store rank={} world=2 count=2 hosted=by-launcher\n", rank, rank)),
        2)
        << r.describe();
  }
}

TEST(CanopyRunStore, AStrangerWithoutTheTokenIsTurnedAway) {
  // The ranks are given the launcher's token; one that presents another cannot join.
  LauncherResult r = run_launcher(
      {"--nproc", "2", "--", "/usr/bin/env", "CANOPY_JOB_TOKEN=wrong", launcher_probe_path(), "rendezvous"},
      {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("rejected our job token"), std::string::npos) << r.describe();
}

TEST(CanopyRunStore, TwoNodesMeetThroughNodeZerosStore) {
  // Two canopy-runs on one machine play two nodes; node 0's store listens on loopback only (--listen-addr).
  // Node 0's ranks finish first; node 0 must keep the store up until node 1's are done with it too.
  const std::map<std::string, std::string> env{{"CANOPY_JOB_TOKEN", "two-node-test-token"}};
  LauncherProcess node0(
      {"--nnodes", "2", "--node-rank", "0", "--nproc", "2", "--master-addr", "127.0.0.1", "--listen-addr",
       "127.0.0.1", "--master-port", "0", launcher_probe_path(), "env", "rendezvous"},
      env);
  ASSERT_TRUE(node0.wait_for_stdout("[0] MASTER_PORT=", 1, std::chrono::seconds(20)))
      << node0.finish(std::chrono::seconds(1)).describe();
  ASSERT_TRUE(node0.wait_for_stdout("[0] PID=", 1, std::chrono::seconds(20)));  // the whole env is there
  auto node0_env = environments_by_rank(node0.out_so_far())[0];
  std::string port = node0_env["CANOPY_MASTER_PORT"];
  ASSERT_FALSE(port.empty()) << node0.out_so_far();
  // torch's env:// store (rank 0's) gets the next port, on every node alike.
  const std::string torch_port = std::to_string(std::stoi(port) + 1);
  EXPECT_EQ(node0_env["MASTER_PORT"], torch_port);

  LauncherResult node1 =
      run_launcher({"--nnodes", "2", "--node-rank", "1", "--nproc", "2", "--master-addr", "127.0.0.1",
                    "--master-port", port, launcher_probe_path(), "env", "rendezvous"},
                   env);
  EXPECT_EQ(node1.exit_code, 0) << node1.describe();
  // Node 1's ranks come after node 0's.
  auto envs = environments_by_rank(node1.out);
  ASSERT_EQ(envs.size(), 2u) << node1.describe();
  for (int local = 0; local < 2; ++local) {
    auto& rank_env = envs[2 + local];
    EXPECT_EQ(rank_env["RANK"], std::to_string(2 + local)) << node1.describe();
    EXPECT_EQ(rank_env["LOCAL_RANK"], std::to_string(local));
    EXPECT_EQ(rank_env["WORLD_SIZE"], "4");
    EXPECT_EQ(rank_env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(rank_env["GROUP_RANK"], "1");
    EXPECT_EQ(rank_env["CANOPY_MASTER_PORT"], port);
    EXPECT_EQ(rank_env["MASTER_PORT"], torch_port);
    EXPECT_EQ(rank_env["CANOPY_JOB_TOKEN"], "two-node-test-token");
  }
  for (int rank : {2, 3}) {
    EXPECT_EQ(count_of(node1.out,
                       fmt::format("[{}] store rank={} world=4 count=4 hosted=by-launcher\n", rank, rank)),
              1)
        << node1.describe();
  }
  LauncherResult node0_result = node0.finish(std::chrono::seconds(30));
  EXPECT_EQ(node0_result.exit_code, 0) << node0_result.describe();
  for (int rank : {0, 1}) {
    EXPECT_EQ(count_of(node0_result.out,
                       fmt::format("[{}] store rank={} world=4 count=4 hosted=by-launcher\n", rank, rank)),
              1)
        << node0_result.describe();
  }
}

TEST(CanopyRunStore, ABusyMasterPortIsAClearError) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::string port = std::to_string(ntohs(address.sin_port));

  LauncherResult r = run_launcher({"--master-port", port, launcher_probe_path(), "env"});
  ::close(listener);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.out, "") << "no rank may start without its store";
  EXPECT_NE(r.err.find("canopy-run: cannot host the store on 127.0.0.1 port " + port + " (--master-port)"),
            std::string::npos)
      << r.describe();
}

}  // namespace
}  // namespace canopy::testing
