// Canopy started by a real SLURM and a real Open MPI, with no address given: canopy-bench under srun on one
// node and on four emulated nodes, several steps of one job side by side, the sbatch script and the mpirun
// line of docs/LAUNCHER.md as written, mpirun inside a SLURM job, mpirun on one host and across two through
// PMIx, the PMIx client under srun --mpi=pmix; and the harness leaving nothing behind when it is killed.
//
// Each test builds its cluster in namespaces of its own (tests/slurm_mpi/private-cluster.sh). They skip
// with the reason where that cannot be done (not root, SLURM or Open MPI not installed); with
// CANOPY_REQUIRE_SLURM_MPI=1 (CI's launcher stage) a skip is a failure.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/pmix_exchange.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/ranks.hpp"

extern char** environ;

namespace canopy::testing {
namespace {

// A harness's run: how it ended and what it printed, stdout and stderr together.
struct HarnessRun {
  int exit_code = -1;  // 124 when the test's own deadline stopped it
  std::string output;
};
using CommandResult = HarnessRun;

HarnessRun run_command(const std::string& line, int timeout_seconds) {
  const auto result = run_shell(line, std::chrono::seconds(timeout_seconds));
  return {result.timed_out ? 124 : result.exit_code, result.out};
}

constexpr int kSkipped = 77;  // the harness cannot run here; its output says why

const std::string kBinDir = CANOPY_BIN_DIR;
const std::string kScripts = std::string(CANOPY_SOURCE_DIR) + "/tests/slurm_mpi";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// elastic_trainer's last line, "<lead><digest> expected <digest>": the two digests of each line that
// starts with `lead` (its output prefix and "final step N digest ").
struct FinalDigest {
  std::string got, expected;
};
std::vector<FinalDigest> final_digests(const std::string& trained, const std::string& lead) {
  constexpr std::size_t kDigest = 16, kBetween = 10;  // " expected "
  std::vector<FinalDigest> found;
  for (std::size_t at = trained.find(lead); at != std::string::npos; at = trained.find(lead, at + 1)) {
    const std::string rest = trained.substr(at + lead.size(), kDigest + kBetween + kDigest);
    found.push_back({rest.substr(0, kDigest), rest.substr(std::min(rest.size(), kDigest + kBetween))});
  }
  return found;
}

#define SKIP_OR_FAIL_UNLESS_RUNNABLE(result)                                             \
  do {                                                                                   \
    if ((result).exit_code == kSkipped) {                                                \
      if (std::getenv("CANOPY_REQUIRE_SLURM_MPI") != nullptr) FAIL() << (result).output; \
      GTEST_SKIP() << (result).output;                                                   \
    }                                                                                    \
  } while (false)

#define SKIP_OR_FAIL_WITHOUT_PMIX()                                            \
  do {                                                                         \
    if (!rendezvous::pmix_built()) {                                           \
      CommandResult skipped{kSkipped, "this build has no PMIx (libpmix-dev)"}; \
      SKIP_OR_FAIL_UNLESS_RUNNABLE(skipped);                                   \
    }                                                                          \
  } while (false)

// Every test needs root for its namespaces; without it, nothing else is tried (not even the work directory
// in the build tree, which may not be writable then).
class NeedsRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      CommandResult skipped{kSkipped, "needs root (namespaces, daemons)"};
      SKIP_OR_FAIL_UNLESS_RUNNABLE(skipped);
    }
  }
};
class Slurm : public NeedsRoot {};
class Mpirun : public NeedsRoot {};
class PrivateCluster : public NeedsRoot {};

// A shell command line run with no address, port or interface inherited (ctest sets
// CANOPY_SOCKET_IFNAME=lo, which would keep the emulated nodes apart), canopy-bench on the PATH, and the
// build's binaries and work directories seen on every node, wherever the build lies.
std::string clean(const std::string& command) {
  return fmt::format(
      "env -u CANOPY_SOCKET_IFNAME -u MASTER_ADDR -u MASTER_PORT -u CANOPY_MASTER_ADDR -u CANOPY_MASTER_PORT "
      "-u CANOPY_JOB_TOKEN PATH={0}:$PATH PRIVATE_CLUSTER_SHARED='{0}\n{1}' {2}",
      kBinDir, CANOPY_TEST_WORK_DIR, command);
}

CommandResult on_slurm(const std::string& options, const std::string& command, int timeout = 150) {
  return run_command(clean(fmt::format("{}/slurm-cluster.sh {} --timeout {} -- sh -c '{}'", kScripts, options,
                                       timeout - 20, command)),
                     timeout);
}

CommandResult on_mpirun(const std::string& options, const std::string& mpirun_arguments, int timeout = 150) {
  return run_command(clean(fmt::format("{}/mpirun-cluster.sh {} --timeout {} -- {}", kScripts, options,
                                       timeout - 20, mpirun_arguments)),
                     timeout);
}

// A work directory every emulated node sees (their /tmp is their own, with the checkout bound into it):
// under the build tree.
struct WorkDir : TempDir {
  WorkDir() : TempDir(CANOPY_TEST_WORK_DIR) {}
  std::string file(const std::string& name) const { return path() + "/" + name; }
};

// Submits `script` from `work` with `sbatch --wait OPTIONS` and shows its output (slurm-<job>.out there).
CommandResult on_sbatch(const std::string& cluster_options, const WorkDir& work, const std::string& script,
                        const std::string& sbatch_options = "") {
  std::ofstream(work.file("job.sbatch")) << script;
  return on_slurm(cluster_options, fmt::format("cd {} && sbatch --wait {} job.sbatch; status=$?; cat *.out; "
                                               "exit $status",
                                               work.path(), sbatch_options));
}

// The rows of canopy-bench --json: each exact, on `ranks` ranks and `hosts` hosts.
void expect_exact_rows(const std::string& json_path, int ranks, int hosts, const std::string& context) {
  const std::string text = read_file(json_path);
  ASSERT_FALSE(text.empty()) << "no " << json_path << "\n" << context;
  const auto rows = nlohmann::json::parse(text);
  ASSERT_GT(rows.size(), 0u) << context;
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("wrong"), 0) << row.dump() << "\n" << context;
    EXPECT_EQ(row.at("ranks"), ranks) << row.dump();
    EXPECT_EQ(row.at("hosts"), hosts) << row.dump();
  }
}

// The first block of the doc that starts with `opening`, up to its closing fence.
std::string doc_block(const std::string& doc, const std::string& opening) {
  const std::size_t start = doc.find(opening);
  if (start == std::string::npos) return "";
  const std::size_t body = doc.find('\n', start) + 1;
  return doc.substr(body, doc.find("```", body) - body);
}

const std::string kSmallSweep = "-b 8 -e 256K -f 32 -n 3 -w 1 -c 1 --min-time 0";

// `srun SRUN_OPTIONS canopy-bench` all-reduce, then broadcast, on a cluster made with CLUSTER_OPTIONS: both
// exact, on `ranks` ranks and `hosts` hosts.
void expect_srun_sweeps_exact(const std::string& cluster_options, const std::string& srun_options, int ranks,
                              int hosts) {
  WorkDir work;
  auto r = on_slurm(cluster_options, fmt::format("srun {0} canopy-bench allreduce {1} --json {2} && "
                                                 "srun {0} canopy-bench broadcast {1} --json {3}",
                                                 srun_options, kSmallSweep, work.file("allreduce.json"),
                                                 work.file("broadcast.json")));
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_exact_rows(work.file("allreduce.json"), ranks, hosts, r.output);
  expect_exact_rows(work.file("broadcast.json"), ranks, hosts, r.output);
}

TEST_F(Slurm, OneNodeRunsMoreTasksThanCpusExactlyWithoutAnAddress) {
  expect_srun_sweeps_exact("--nodes 1 --cpus 2", "-O -n 4", 4, 1);
}

// Two steps of one job at once, each on a port of its own: one SLURM reserved for it (slurm.conf's
// MpiParams=ports reserves ports for every step), one derived from the job and step ids (--resv-ports=0
// reserves none).
TEST_F(Slurm, StepsOfOneJobRunSideBySide) {
  WorkDir work;
  const std::string script = fmt::format(
      "#!/bin/sh\n"
      "export CANOPY_DEBUG=INFO\n"
      "srun --exact -n 2 canopy-bench allreduce {0} --json {1}/a.json >{1}/a.out 2>&1 &\n"
      "srun --exact --resv-ports=0 -n 2 canopy-bench allreduce {0} --json {1}/b.json >{1}/b.out 2>&1 &\n"
      "wait %1 && wait %2\n",
      kSmallSweep, work.path());
  auto r = on_sbatch("--nodes 1 --cpus 4", work, script, "-n 4");
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  ASSERT_EQ(r.exit_code, 0) << r.output << read_file(work.file("a.out")) << read_file(work.file("b.out"));
  expect_exact_rows(work.file("a.json"), 2, 1, read_file(work.file("a.out")));
  expect_exact_rows(work.file("b.json"), 2, 1, read_file(work.file("b.out")));
  EXPECT_TRUE(contains(read_file(work.file("a.out")), "the first of SLURM_STEP_RESV_PORTS"))
      << read_file(work.file("a.out"));
  EXPECT_TRUE(contains(read_file(work.file("b.out")), "derived from SLURM_JOB_ID="))
      << read_file(work.file("b.out"));
}

TEST_F(Slurm, FourNodesRunEightTasksOverCappedLinksExactly) {
  expect_srun_sweeps_exact("--nodes 4 --rate 200mbit", "-N 4 -n 8", 8, 4);
}

TEST_F(Slurm, TheSbatchScriptOfTheLauncherDocWorksAsWritten) {
  const std::string script = doc_block(read_file(std::string(CANOPY_SOURCE_DIR) + "/docs/LAUNCHER.md"),
                                       "```sh\n#!/bin/bash\n#SBATCH");
  ASSERT_TRUE(contains(script, "srun canopy-bench")) << script;
  WorkDir work;
  auto r = on_sbatch("--nodes 2 --cpus 4", work, "#!/bin/bash\n" + script);
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  ASSERT_EQ(r.exit_code, 0) << script << r.output;
  EXPECT_TRUE(contains(r.output, "on 8 ranks (2 hosts)")) << r.output;
  EXPECT_TRUE(contains(r.output, "Avg bus bandwidth")) << r.output;
}

// Under srun there is no canopy-run to start a replacement, but the survivors of a task that dies shrink
// and train on (docs/LAUNCHER.md, *Under srun and mpirun*): srun without -K lets them run to their end. Task
// 1 of elastic_trainer is SIGKILLed at step 20; tasks 0 (which hosts the store) and 2 end with the weights
// of a run without a failure, and srun's status is the dead task's.
TEST_F(Slurm, SurvivorsOfAKilledTaskShrinkAndFinishUnderSrun) {
  if (!std::filesystem::exists(std::string(kBinDir) + "/elastic_trainer"))
    GTEST_SKIP() << "elastic_trainer is not built (CANOPY_BUILD_EXAMPLES=OFF)";
  WorkDir work;
  const std::string script = fmt::format(
      "#!/bin/sh\n"
      "srun -l -n 3 elastic_trainer --steps 150 --step-ms 20 --no-grow >{0}/train.out 2>&1 &\n"
      "srun_pid=$!\n"
      "for i in $(seq 600); do grep -q \"^1: step 20 rank\" {0}/train.out && break; sleep 0.1; done\n"
      "kill -9 $(sed -n \"s/^1: started pid \\([0-9]*\\) .*/\\1/p\" {0}/train.out)\n"
      "wait $srun_pid\n"
      "echo \"srun exited $?\"\n",
      work.path());
  auto r = on_sbatch("--nodes 1 --cpus 4", work, script, "-n 3");
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  const std::string trained = read_file(work.file("train.out"));
  const std::string context = r.output + "\n--- train.out ---\n" + trained;
  EXPECT_TRUE(contains(r.output, "srun exited 137")) << context;  // 128 + SIGKILL, task 1's
  for (const char* survivor : {"0", "2"}) {
    EXPECT_TRUE(contains(trained, fmt::format("{}: shrunk to size 2", survivor))) << context;
    const auto finals = final_digests(trained, fmt::format("{}: final step 150 digest ", survivor));
    ASSERT_FALSE(finals.empty()) << context;
    EXPECT_EQ(finals[0].got, finals[0].expected) << "task " << survivor << "\n" << context;
  }
  EXPECT_FALSE(contains(trained, "1: final step")) << context;
}

// docs/LAUNCHER.md's elastic job under SLURM, on a real etcd member: one canopy-run a node under `srun
// --no-kill`, --nnodes 1:2 on 3 nodes, so that the third is a spare waiting for room. Node 0's canopy-run is
// SIGKILLed mid-training (its ranks die with it): node 1's ranks shrink, the spare joins at their next grow,
// and all four end with the weights of a run without a failure.
TEST_F(Slurm, AnElasticJobOnEtcdLosesANodeAndTheSpareJoins) {
  if (!std::filesystem::exists(std::string(kBinDir) + "/elastic_trainer"))
    GTEST_SKIP() << "elastic_trainer is not built (CANOPY_BUILD_EXAMPLES=OFF)";
  if (!std::filesystem::exists("/usr/bin/etcd")) {
    CommandResult skipped{kSkipped, "etcd is not installed (Debian: etcd-server)"};
    SKIP_OR_FAIL_UNLESS_RUNNABLE(skipped);
  }
  WorkDir work;
  // Which node is the spare is the order the canopy-runs met etcd in: the node holding rank 0 is a member,
  // and its canopy-run is the parent of the process that printed "[0] started pid P". The spare starts its
  // ranks once the lost node's lease has expired (about 5 s): the 970 steps after the loss last about 20 s,
  // so that they are still training when it joins, on a loaded machine too.
  std::string script = R"(#!/bin/sh
addr=$(getent hosts $(hostname) | awk '{print $1; exit}')
/usr/bin/etcd --name m0 --data-dir /tmp/etcd-data --listen-client-urls http://$addr:2379 \
  --advertise-client-urls http://$addr:2379 --listen-peer-urls http://$addr:2380 \
  --initial-advertise-peer-urls http://$addr:2380 --initial-cluster m0=http://$addr:2380 >WORK/etcd.log 2>&1 &
for i in $(seq 100); do curl -s -m 1 http://$addr:2379/health | grep -q true && break; sleep 0.1; done
export CANOPY_JOB_TOKEN=slurm-elastic-test CANOPY_HEARTBEAT_TIMEOUT_SECONDS=2
srun --no-kill -l -N 3 --ntasks-per-node=1 canopy-run --nnodes 1:2 --nproc 2 --rdzv-backend etcd \
  --rdzv-endpoint $addr:2379 --rdzv-id job-$SLURM_JOB_ID --rdzv-conf join_timeout=60 \
  elastic_trainer --steps 1000 --step-ms 20 >WORK/train.out 2>&1 &
srun_pid=$!
for i in $(seq 600); do grep -q '^[0-9]: \[0\] step 30 rank' WORK/train.out && break; sleep 0.1; done
rank0=$(sed -n 's/^[0-9]: \[0\] started pid \([0-9]*\) .*/\1/p' WORK/train.out)
kill -9 $(ps -o ppid= -p $rank0)
wait $srun_pid
echo "srun exited $?"
)";
  for (std::size_t at = script.find("WORK"); at != std::string::npos; at = script.find("WORK", at))
    script.replace(at, 4, work.path());
  auto r = on_sbatch("--nodes 3 --cpus 2", work, script, "-N 3 --ntasks-per-node=1");
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  const std::string trained = read_file(work.file("train.out"));
  const std::string context = r.output + "\n--- train.out ---\n" + trained;
  EXPECT_TRUE(contains(trained, "shrunk to size 2")) << context;
  EXPECT_TRUE(contains(trained, "grew to size 4")) << context;
  const auto finals = final_digests(trained, "final step 1000 digest ");
  std::set<std::string> digests;
  for (const FinalDigest& final : finals) {
    EXPECT_EQ(final.got, final.expected) << context;
    digests.insert(final.got);
  }
  EXPECT_EQ(finals.size(), 4u) << context;
  EXPECT_EQ(digests.size(), 1u) << context;
}

// mpirun inside a SLURM job, as on most clusters: it starts its daemons with srun, and its ranks carry
// SLURM's variables too (the batch script's on the first node, a step's on the other), which must not
// count. A program the batch script runs directly, without srun, is told so at once.
TEST_F(Slurm, MpirunInsideAJobAndAProgramOutsideAnyStep) {
  WorkDir work;
  const std::string script = fmt::format(
      "#!/bin/sh\n"
      "mpirun --allow-run-as-root canopy-bench allreduce {0} --json {1}/mpirun.json\n"
      "canopy-bench allreduce {0} >{1}/direct.out 2>&1 && exit 3\n"
      "exit 0\n",
      kSmallSweep, work.path());
  auto r = on_sbatch("--nodes 2 --cpus 2", work, script, "-N 2 --ntasks-per-node=2");
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_exact_rows(work.file("mpirun.json"), 4, 2, r.output);
  EXPECT_TRUE(contains(read_file(work.file("direct.out")), "start the ranks with srun"))
      << read_file(work.file("direct.out"));
}

// The PMIx client Canopy uses under mpirun also works under srun --mpi=pmix.
TEST_F(Slurm, ThePmixClientWorksUnderSrun) {
  SKIP_OR_FAIL_WITHOUT_PMIX();
  auto r = on_slurm("--nodes 2", fmt::format("srun --mpi=pmix -N 2 -n 4 {}", PMIX_PROBE_PATH));
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(contains(r.output, fmt::format("pmix: rank {} of 4 got 'rank 0 on cnpy-s-n0 (net ", rank)))
        << r.output;
}

TEST_F(Mpirun, TheLauncherDocsLineRunsFourRanksOnOneHost) {
  const std::string doc = read_file(std::string(CANOPY_SOURCE_DIR) + "/docs/LAUNCHER.md");
  const std::size_t at = doc.find("\nmpirun -np 4 canopy-bench");
  ASSERT_NE(at, std::string::npos) << "docs/LAUNCHER.md has no 'mpirun -np 4 canopy-bench' line";
  std::string line = doc.substr(at + 1, doc.find('\n', at + 1) - at - 1);
  line = line.substr(0, line.find("  #"));  // without its comment
  auto r = on_mpirun("--nodes 1 --cpus 4", line.substr(std::string("mpirun ").size()));
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  ASSERT_EQ(r.exit_code, 0) << line << "\n" << r.output;
  EXPECT_TRUE(contains(r.output, "on 4 ranks (1 host)")) << r.output;
  EXPECT_TRUE(contains(r.output, "Avg bus bandwidth")) << r.output;
}

TEST_F(Mpirun, TwoHostsFindTheStoreThroughPmix) {
  SKIP_OR_FAIL_WITHOUT_PMIX();
  WorkDir work;
  auto r = on_mpirun("--nodes 2 --cpus 2 --rate 200mbit",
                     fmt::format("-np 4 -x CANOPY_DEBUG=INFO canopy-bench allreduce {} --json {}",
                                 kSmallSweep, work.file("allreduce.json")));
  SKIP_OR_FAIL_UNLESS_RUNNABLE(r);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_exact_rows(work.file("allreduce.json"), 4, 2, r.output);
  EXPECT_TRUE(contains(r.output, "rendezvous: rank 3 of 4 (openmpi launch) uses the TcpStore at 198.18.0.1:"))
      << r.output;
  auto probe = on_mpirun("--nodes 2 --cpus 2", fmt::format("-np 4 {}", PMIX_PROBE_PATH));
  ASSERT_EQ(probe.exit_code, 0) << probe.output;
  EXPECT_TRUE(contains(probe.output, "pmix: rank 3 of 4 got 'rank 0 on cnpy-m-n0 (net ")) << probe.output;
}

// Every process below `root` (itself included), from /proc.
std::set<pid_t> process_tree(pid_t root) {
  std::set<pid_t> tree{root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const std::size_t close = text.rfind(')');
      if (close == std::string::npos) continue;
      char state = 0;
      pid_t parent = 0;
      if (std::sscanf(text.c_str() + close + 1, " %c %d", &state, &parent) != 2) continue;
      const pid_t pid = std::stoi(name);
      if (tree.count(parent) != 0 && tree.insert(pid).second) grew = true;
    }
  }
  return tree;
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

// SIGKILL leaves the harness no chance to clean up: the kernel must do it, by the namespaces.
TEST_F(PrivateCluster, NothingOutlivesAKilledHarness) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // so that orphans come here to be reaped
  WorkDir work;
  const std::string log = work.file("harness.log");
  const std::string command =
      "exec " + clean(fmt::format("{}/slurm-cluster.sh --nodes 2 -- sleep 60 >{} 2>&1", kScripts, log));
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t harness = -1;
  ASSERT_EQ(::posix_spawn(&harness, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (!contains(read_file(log), "idle") && std::chrono::steady_clock::now() < limit) {
    if (::waitpid(harness, &status, WNOHANG) == harness) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kSkipped) {
    CommandResult skipped{kSkipped, read_file(log)};
    SKIP_OR_FAIL_UNLESS_RUNNABLE(skipped);
  }
  ASSERT_TRUE(contains(read_file(log), "idle")) << read_file(log);
  const std::set<pid_t> started = process_tree(harness);
  EXPECT_GE(started.size(), 6u) << "harness, unshare, timeout, munged, slurmctld, 2 slurmd, sleep";
  ASSERT_EQ(::kill(harness, SIGKILL), 0);
  limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::set<pid_t> left = started;
  while (!left.empty() && std::chrono::steady_clock::now() < limit) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    for (auto it = left.begin(); it != left.end();) it = alive(*it) ? std::next(it) : left.erase(it);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(left.empty()) << left.size() << " of the harness's " << started.size()
                            << " processes outlived it by 5 s";
  for (pid_t pid : left) ::kill(pid, SIGKILL);
}

}  // namespace
}  // namespace canopy::testing
