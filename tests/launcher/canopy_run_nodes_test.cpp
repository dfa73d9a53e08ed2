// canopy-run across nodes on etcd (--nnodes MIN:MAX --rdzv-backend etcd): real etcd, real canopy-run
// processes, one per "node" (CANOPY_HOST_ID tells their ranks apart as hosts), running
// examples/elastic_trainer.cpp. The first node is SIGKILLed whole (its canopy-run and its ranks): the others
// train on with exact results and a node started later joins; with fewer than MIN nodes left every
// surviving node stops with one line. On three etcd members: one killed mid-training costs a pause; two
// (quorum lost) end every node with the store named, and a restart resumes from the trainer's checkpoint.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/launcher/launcher_runner.hpp"
#include "tests/support/etcd_cluster.hpp"

namespace canopy::testing {
namespace {

using std::chrono::seconds;

// A heartbeat timeout of 2 s: survivors on other "hosts" judge a dead rank by its heartbeat. The token is the
// job's, the same on every node.
std::map<std::string, std::string> node_environment(const std::string& host, int timeout_s = 20) {
  return {{"CANOPY_HOST_ID", host},
          {"CANOPY_JOB_TOKEN", "nodes-test-token"},
          {"CANOPY_TIMEOUT", std::to_string(timeout_s)},
          {"CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "2"}};
}

// "127.0.0.1:P0,127.0.0.1:P1,...": --rdzv-endpoint, and what names the store in errors.
std::string endpoints(const EtcdCluster& etcd) {
  std::string text;
  for (int i = 0; i < etcd.size(); ++i) text += (i ? "," : "") + etcd.member(i);
  return text;
}

struct Node {
  std::string host;
  std::unique_ptr<LauncherProcess> run;
};

// A node's canopy-run: `nproc` ranks of elastic_trainer, meeting the others under `id`. A long last call
// costs nothing when every node comes (it ends once MAX are there) and keeps a slow start from turning
// a member into a newcomer. Every etcd member is given, as on a real cluster.
Node start_node(const EtcdCluster& etcd, const std::string& id, const std::string& nodes, int nproc,
                const std::string& host, const std::vector<std::string>& trainer_args, int timeout_s = 20) {
  std::vector<std::string> args{"--nproc",           std::to_string(nproc),
                                "--nnodes",          nodes,
                                "--rdzv-backend",    "etcd",
                                "--rdzv-endpoint",   endpoints(etcd),
                                "--rdzv-id",         id,
                                "--rdzv-conf",       "node_ttl=1,last_call_timeout=5",
                                ELASTIC_TRAINER_PATH};
  args.insert(args.end(), trainer_args.begin(), trainer_args.end());
  return Node{host, std::make_unique<LauncherProcess>(args, node_environment(host, timeout_s))};
}

// The pids the node's ranks printed at their start ("[2] started pid 1234 as member at ...").
std::vector<pid_t> rank_pids(const std::string& out) {
  std::vector<pid_t> pids;
  for (const std::string& line : lines_of(out)) {
    int rank = -1, pid = -1;
    if (std::sscanf(line.c_str(), "[%d] started pid %d as", &rank, &pid) == 2) pids.push_back(pid);
  }
  return pids;
}

// The whole node at once, as a power cut would: canopy-run's process group and every rank it started.
void kill_node(Node& node) {
  const std::vector<pid_t> ranks = rank_pids(node.run->out_so_far());
  ASSERT_EQ(::kill(-node.run->pid(), SIGKILL), 0);
  for (pid_t pid : ranks) ::kill(pid, SIGKILL);
}

// Waits until every node printed step `step` of each of its ranks, and returns the index of the node
// holding rank 0 (the first of the member list).
int wait_for_step(std::vector<Node>& nodes, int nproc, int step, int size) {
  int first = -1;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string line = fmt::format(" step {} rank ", step);
    EXPECT_TRUE(nodes[i].run->wait_for_stdout(line, nproc, seconds(30)))
        << nodes[i].host << " never got to step " << step << ":\n"
        << nodes[i].run->out_so_far();
    if (count_of(nodes[i].run->out_so_far(), fmt::format("[0] step {} rank 0 size {} ", step, size)) == 1)
      first = static_cast<int>(i);
  }
  return first;
}

int final_digests_matching(const std::string& out, int steps, std::set<std::string>& digests) {
  int finals = 0;
  const std::string pattern = fmt::format("] final step {} digest %16s expected %16s", steps);
  for (const std::string& line : lines_of(out)) {
    const auto bracket = line.find(']');
    char digest[17] = {}, expected[17] = {};
    if (bracket == std::string::npos ||
        std::sscanf(line.c_str() + bracket, pattern.c_str(), digest, expected) != 2)
      continue;
    EXPECT_STREQ(digest, expected) << line;
    digests.insert(digest);
    ++finals;
  }
  return finals;
}

class CanopyRunNodes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_installed()) GTEST_SKIP() << "etcd is not installed (Debian: etcd-server)";
    etcd_ = std::make_unique<EtcdCluster>(1);
  }
  std::unique_ptr<EtcdCluster> etcd_;
};

TEST_F(CanopyRunNodes, TheFirstNodeKilledWholeLeavesTheOthersTrainingAndALaterNodeJoins) {
  constexpr int kSteps = 250;  // 5 s of 20 ms steps, more on a loaded machine: the newcomer joins within 3 s
  const std::vector<std::string> trainer{"--steps", std::to_string(kSteps), "--step-ms", "20"};
  std::vector<Node> nodes;
  for (const char* host : {"a", "b", "c"})
    nodes.push_back(start_node(*etcd_, "kill", "2:3", 2, host, trainer));
  const int first = wait_for_step(nodes, 2, 10, 6);
  ASSERT_GE(first, 0) << "no node holds rank 0";
  kill_node(nodes[static_cast<std::size_t>(first)]);
  Node later = start_node(*etcd_, "kill", "2:3", 2, "d", trainer);

  const LauncherResult killed = nodes[static_cast<std::size_t>(first)].run->finish(seconds(10));
  EXPECT_EQ(killed.signal, SIGKILL) << killed.describe();
  std::set<std::string> digests;
  int finals = 0;
  const std::string victim = nodes[static_cast<std::size_t>(first)].host;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (static_cast<int>(i) == first) continue;
    const LauncherResult r = nodes[i].run->finish(seconds(60));
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(count_of(r.err, fmt::format("canopy-run: node '{}' (ticket ", victim)), 1) << r.describe();
    EXPECT_EQ(count_of(r.err, "stopping"), 0) << r.describe();
    EXPECT_GE(count_of(r.out, "shrunk to size "), 2) << r.describe();  // each of its two ranks
    EXPECT_GE(count_of(r.out, "grew to size 6"), 2) << r.describe();   // the newcomers admitted
    finals += final_digests_matching(r.out, kSteps, digests);
  }
  const LauncherResult joined = later.run->finish(seconds(60));
  ASSERT_FALSE(joined.timed_out) << joined.describe();
  EXPECT_EQ(joined.exit_code, 0) << joined.describe();
  EXPECT_EQ(count_of(joined.out, " started pid "), 2) << joined.describe();
  EXPECT_EQ(count_of(joined.out, " as replacement at "), 2) << joined.describe();
  EXPECT_EQ(count_of(joined.out, "] joined as rank "), 2) << joined.describe();
  finals += final_digests_matching(joined.out, kSteps, digests);
  EXPECT_EQ(finals, 6) << "two survivors' ranks and the newcomer's, each with the failure-free weights";
  EXPECT_EQ(digests.size(), 1u);
}

TEST_F(CanopyRunNodes, FewerThanMinNodesLeftStopsEveryNodeWithOneLine) {
  const std::vector<std::string> trainer{"--steps", "100000", "--step-ms", "20"};
  std::vector<Node> nodes;
  for (const char* host : {"a", "b", "c"})
    nodes.push_back(start_node(*etcd_, "min", "3:3", 1, host, trainer));
  const int first = wait_for_step(nodes, 1, 5, 3);
  ASSERT_GE(first, 0) << "no node holds rank 0";
  kill_node(nodes[static_cast<std::size_t>(first)]);
  const std::string victim = nodes[static_cast<std::size_t>(first)].host;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const LauncherResult r = nodes[i].run->finish(seconds(30));
    if (static_cast<int>(i) == first) continue;
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    // Its ranks' own lines aside (they are stopped by SIGTERM), canopy-run says one thing: why it stops.
    EXPECT_EQ(count_of(r.err, "canopy-run: "), 1) << r.describe();
    // The victim is named; the other survivor too where it stopped (and removed its record) first.
    EXPECT_EQ(count_of(r.err, fmt::format("canopy-run: node '{}' (ticket ", victim)), 1) << r.describe();
    EXPECT_EQ(count_of(r.err, " left (node '"), 1) << r.describe();
    EXPECT_EQ(count_of(r.err, "fewer than the 3 of --nnodes 3:3: stopping this node's ranks\n"), 1)
        << r.describe();
    EXPECT_LT(r.elapsed, seconds(25)) << r.describe();
    for (pid_t pid : rank_pids(r.out)) EXPECT_FALSE(process_exists(pid)) << "a rank outlived canopy-run";
  }
}

// A node that joins a job whose members never grow (--no-grow) waits in join(); once the members finish,
// its canopy-run stops its ranks rather than let them wait out CANOPY_TIMEOUT (20 s here).
TEST_F(CanopyRunNodes, ANodeTheJobNeverAdmitsIsStoppedWhenTheJobFinishes) {
  const std::vector<std::string> trainer{"--steps", "100", "--step-ms", "20", "--no-grow"};
  std::vector<Node> nodes;
  for (const char* host : {"a", "b"}) nodes.push_back(start_node(*etcd_, "late", "2:3", 1, host, trainer));
  wait_for_step(nodes, 1, 10, 2);
  Node later = start_node(*etcd_, "late", "2:3", 1, "c", trainer);
  ASSERT_TRUE(later.run->wait_for_stdout(" as replacement at ", 1, seconds(20))) << later.run->out_so_far();
  for (Node& node : nodes) {
    const LauncherResult r = node.run->finish(seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(count_of(r.err, "canopy-run: "), 0) << r.describe();
  }
  const LauncherResult r = later.run->finish(seconds(30));
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(
      count_of(r.err,
               "canopy-run: the job has finished on the other nodes without admitting this node's ranks "
               "waiting to join: stopping rank 2 (pid "),
      1)
      << r.describe();
  EXPECT_EQ(count_of(r.err, "canopy-run: "), 1) << r.describe();
  EXPECT_LT(r.elapsed, seconds(15)) << r.describe();  // not the newcomer's 20 s timeout
}

// Fewer than MIN nodes within join_timeout: an error that names the nodes that came, not a hang.
TEST_F(CanopyRunNodes, TooFewNodesToStartIsAClearErrorAtTheJoinTimeout) {
  const LauncherResult r =
      run_launcher({"--nnodes", "2:3", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd_->member(0),
                    "--rdzv-id", "alone", "--rdzv-conf", "join_timeout=1", "/bin/true"},
                   node_environment("a"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(count_of(r.err, "canopy-run: only 1 node of the 2 nodes that --nnodes 2:3 needs met in etcd://"),
            1)
      << r.describe();
  EXPECT_EQ(count_of(r.err, "within 1 s (--rdzv-conf join_timeout): node 'a' (ticket 1)\n"), 1)
      << r.describe();
  EXPECT_LT(r.elapsed, seconds(10)) << r.describe();
}

TEST_F(CanopyRunNodes, AJobIdIsNotReusedOnceItsJobHasEnded) {
  const std::vector<std::string> args{
      "--nnodes",       "1:2",       "--rdzv-backend", "etcd",     "--rdzv-endpoint",
      etcd_->member(0), "--rdzv-id", "once",           "/bin/true"};
  const LauncherResult first = run_launcher(args, node_environment("a"));
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  const LauncherResult again = run_launcher(args, node_environment("a"));
  EXPECT_EQ(again.exit_code, 1) << again.describe();
  EXPECT_EQ(count_of(again.err, "canopy-run: the job 'once' ("), 1) << again.describe();
  EXPECT_EQ(count_of(again.err, "a new job needs a --rdzv-id of its own"), 1) << again.describe();
}

}  // namespace
}  // namespace canopy::testing

namespace canopy::testing {
namespace {

class CanopyRunOnThreeEtcdMembers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_installed()) GTEST_SKIP() << "etcd is not installed (Debian: etcd-server)";
    etcd_ = std::make_unique<EtcdCluster>(3);  // elections tuned: 50 ms heartbeat, 300 ms election timeout
  }
  std::unique_ptr<EtcdCluster> etcd_;
};

// elastic_trainer asks for the join tickets every step, the liveness monitor's reading: a step never waits
// out the election, and nothing else happens (no shrink, the failure-free weights).
TEST_F(CanopyRunOnThreeEtcdMembers, KillingTheLeaderMidTrainingCostsAPauseAndNothingElse) {
  constexpr int kSteps = 150;
  const std::vector<std::string> trainer{"--steps", std::to_string(kSteps), "--step-ms", "20"};
  std::vector<Node> nodes;
  for (const char* host : {"a", "b"}) nodes.push_back(start_node(*etcd_, "leader", "2:2", 1, host, trainer));
  wait_for_step(nodes, 1, 20, 2);
  etcd_->kill(etcd_->leader());
  std::set<std::string> digests;
  int finals = 0;
  for (Node& node : nodes) {
    const LauncherResult r = node.run->finish(seconds(60));
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(count_of(r.out, "shrunk to size "), 0) << r.describe();
    EXPECT_EQ(count_of(r.err, "canopy-run: "), 0) << r.describe();
    finals += final_digests_matching(r.out, kSteps, digests);
  }
  EXPECT_EQ(finals, 2);
  EXPECT_EQ(digests.size(), 1u);
}

// Two of three members killed: once the monitor's reading of the join tickets is older than the heartbeat
// timeout (2 s), a step reads the store itself and fails at its deadline (CANOPY_TIMEOUT, 3 s), the shrink
// that follows fails at its own, and every node ends with the store named. Nothing committed is
// lost: with the members back, a new job resumes from rank 0's last checkpoint and ends exact.
TEST_F(CanopyRunOnThreeEtcdMembers, LosingQuorumEndsEveryNodeNamingTheStoreAndARestartResumes) {
  TempDir checkpoints;
  const std::vector<std::string> trainer{"--steps",          "100000", "--step-ms", "20", "--checkpoint-dir",
                                         checkpoints.path(), "--checkpoint-every", "10"};
  std::vector<Node> nodes;
  for (const char* host : {"a", "b"})
    nodes.push_back(start_node(*etcd_, "quorum", "2:2", 1, host, trainer, /*timeout_s=*/3));
  wait_for_step(nodes, 1, 25, 2);
  const int leader = etcd_->leader();
  const int follower = (leader + 1) % 3;
  etcd_->kill(leader);
  etcd_->kill(follower);
  const auto killed = std::chrono::steady_clock::now();
  for (Node& node : nodes) {
    const LauncherResult r = node.run->finish(seconds(60));
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    // Two call deadlines for the rank, then canopy-run's own bounded requests (a count, its record's removal).
    EXPECT_LT(std::chrono::steady_clock::now() - killed, seconds(25)) << r.describe();
    EXPECT_EQ(count_of(r.err, "] elastic_trainer: "), 1) << r.describe();
    EXPECT_EQ(count_of(r.err, "cannot be decided: the store failed"), 1) << r.describe();
    EXPECT_GE(count_of(r.err, "on the etcd store etcd://" + endpoints(*etcd_) + "/canopy-run/quorum"), 1)
        << r.describe();
    EXPECT_LE(count_of(r.err, "renewing lease"), 1) << "one warning an outage:\n" << r.describe();
    for (pid_t pid : rank_pids(r.out)) EXPECT_FALSE(process_exists(pid)) << "a rank outlived canopy-run";
  }

  etcd_->restart(leader);
  etcd_->restart(follower);
  constexpr int kSteps = 150;  // past any checkpoint the first job reached before the store failed it
  const std::vector<std::string> again{"--steps",          std::to_string(kSteps), "--step-ms", "20",
                                       "--checkpoint-dir", checkpoints.path(), "--checkpoint-every", "10"};
  std::vector<Node> restarted;
  for (const char* host : {"a", "b"})
    restarted.push_back(start_node(*etcd_, "quorum-restart", "2:2", 1, host, again));
  std::set<std::string> digests;
  int finals = 0;
  for (Node& node : restarted) {
    const LauncherResult r = node.run->finish(seconds(60));
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    int resumed = -1;
    for (const std::string& line : lines_of(r.out))
      if (const auto at = line.find("resumed from checkpoint step "); at != std::string::npos)
        resumed = std::stoi(line.substr(at + 29));
    EXPECT_GE(resumed, 20) << "the first job trained past step 25 and wrote every 10:\n" << r.describe();
    finals += final_digests_matching(r.out, kSteps, digests);
  }
  EXPECT_EQ(finals, 2);
  EXPECT_EQ(digests.size(), 1u);
}

}  // namespace
}  // namespace canopy::testing
