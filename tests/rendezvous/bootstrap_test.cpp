// rendezvous(): real forked ranks meeting through a TcpStore hosted by rank 0 or through a FileStore,
// deriving local ranks, and failing clearly when the group cannot form.
#include "rendezvous/bootstrap.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::rendezvous {
namespace {

using namespace std::chrono_literals;
using testing::require;

// A port that is free now, below the kernel's ephemeral range: the rendezvous binds it a moment later,
// and a port of that range could meanwhile become the source port of any connection on the machine
// (another test's, run beside this one).
std::uint16_t free_port() {
  int lowest_ephemeral = 32768;
  if (std::FILE* range = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(range, "%d", &lowest_ephemeral) != 1) lowest_ephemeral = 32768;
    std::fclose(range);
  }
  const int first = 10000;
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(first, std::max(first, lowest_ephemeral - 1));
  for (int attempt = 0; attempt < 100; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(random));
    try {
      TcpStoreServer probe("127.0.0.1", port, "");
      return port;
    } catch (const Error&) {
      // taken: try another
    }
  }
  TcpStoreServer probe("127.0.0.1", 0, "");
  return probe.port();
}

// Every rank publishes its view; the checks run in each rank, then rank 0 (which may host the store)
// stays until everyone is done with it.
void meet_and_check(Rendezvous& r, int world_size, const std::vector<int>& local_rank,
                    const std::vector<int>& local_world_size) {
  const LaunchInfo& info = r.info;
  require(info.world_size == world_size, "rank {}: world size {} != {}", info.rank, info.world_size,
          world_size);
  require(info.local_rank == local_rank[static_cast<std::size_t>(info.rank)], "rank {}: local rank {} != {}",
          info.rank, info.local_rank, local_rank[static_cast<std::size_t>(info.rank)]);
  require(info.local_world_size == local_world_size[static_cast<std::size_t>(info.rank)],
          "rank {}: local world size {} != {}", info.rank, info.local_world_size,
          local_world_size[static_cast<std::size_t>(info.rank)]);
  r.store->set("hello/" + std::to_string(info.rank), std::to_string(info.rank * 10));
  for (int peer = 0; peer < world_size; ++peer) {
    auto value = r.store->get("hello/" + std::to_string(peer), 20s);
    require(value == std::to_string(peer * 10), "rank {} read '{}' from rank {}", info.rank, value, peer);
  }
  r.store->add("done", 1);
  if (r.server) {
    std::vector<std::string> keys;
    r.store->set("done/0", "");
    for (int peer = 0; peer < world_size; ++peer) keys.push_back("done/" + std::to_string(peer));
    r.store->wait(keys, 20s);
  } else {
    r.store->set("done/" + std::to_string(info.rank), "");
  }
}

void expect_all_ok(const std::vector<testing::RankExit>& exits) {
  for (std::size_t rank = 0; rank < exits.size(); ++rank)
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

TEST(Rendezvous, FourTorchrunRanksWithRankZeroHostingAndTwoHosts) {
  std::uint16_t port = free_port();
  auto exits = testing::run_processes(4, [&](int rank) {
    EnvMap env{
        {"RANK", std::to_string(rank)},      {"WORLD_SIZE", "4"},
        {"MASTER_ADDR", "127.0.0.1"},        {"MASTER_PORT", std::to_string(port)},
        {"TORCHELASTIC_RUN_ID", "test-run"}, {"CANOPY_HOST_ID", rank % 2 == 0 ? "even-host" : "odd-host"}};
    auto r = rendezvous(env, 20s);
    require((r.server != nullptr) == (rank == 0), "rank {}: hosts the store: {}", rank, r.server != nullptr);
    require(r.info.source == "torchrun", "rank {}: source {}", rank, r.info.source);
    // even-host: ranks 0 and 2; odd-host: ranks 1 and 3.
    meet_and_check(r, 4, {0, 0, 1, 1}, {2, 2, 2, 2});
  });
  expect_all_ok(exits);
}

// srun gives no address: the ranks meet at the first host of the step's node list, on the port derived
// from the job and step (here the only port of a one-port range, one that is free).
TEST(Rendezvous, SlurmRanksWithoutAnAddressMeetAtTheStepsFirstHost) {
  const std::string port = std::to_string(free_port());
  auto exits = testing::run_processes(3, [&](int rank) {
    EnvMap env{{"SLURM_PROCID", std::to_string(rank)},
               {"SLURM_NTASKS", "3"},
               {"SLURM_LOCALID", std::to_string(rank)},
               {"SLURM_TASKS_PER_NODE", "3"},
               {"SLURM_JOB_ID", "31"},
               {"SLURM_STEP_ID", "2"},
               {"SLURM_STEP_NODELIST", "localhost"},
               {"CANOPY_STORE_PORT_RANGE", port + "-" + port}};
    auto r = rendezvous(env, 20s);
    require((r.server != nullptr) == (rank == 0), "rank {}: hosts the store: {}", rank, r.server != nullptr);
    require(r.info.store_host == "localhost" && std::to_string(r.info.store_port) == port,
            "rank {}: store at {}:{}", rank, r.info.store_host, r.info.store_port);
    meet_and_check(r, 3, {0, 1, 2}, {3, 3, 3});
  });
  expect_all_ok(exits);
}

// mpirun with every rank on this host and no address: loopback, on the port derived from the job id.
TEST(Rendezvous, MpirunRanksOnOneHostWithoutAnAddressMeetOnLoopback) {
  const std::string port = std::to_string(free_port());
  auto exits = testing::run_processes(2, [&](int rank) {
    EnvMap env{{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
               {"OMPI_COMM_WORLD_SIZE", "2"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
               {"OMPI_MCA_ess_base_jobid", "1234"},
               {"CANOPY_STORE_PORT_RANGE", port + "-" + port}};
    auto r = rendezvous(env, 20s);
    require(r.info.store_host == "127.0.0.1", "rank {}: store host {}", rank, r.info.store_host);
    meet_and_check(r, 2, {0, 1}, {2, 2});
  });
  expect_all_ok(exits);
}

// A derived port that is taken: rank 0 says where the port came from and what to set instead.
TEST(Rendezvous, ATakenDerivedPortNamesItsOriginAndTheWayOut) {
  TcpStoreServer squatter("", 0, "");
  const std::string port = std::to_string(squatter.port());
  EnvMap env{{"SLURM_PROCID", "0"},         {"SLURM_NTASKS", "2"},
             {"SLURM_JOB_ID", "31"},        {"SLURM_STEP_ID", "0"},
             {"SLURM_STEP_NODELIST", "n1"}, {"CANOPY_STORE_PORT_RANGE", port + "-" + port}};
  try {
    rendezvous(env, 2s);
    ADD_FAILURE() << "rank 0 hosted a store on a taken port";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("derived from SLURM_JOB_ID=31"), std::string::npos) << message;
    EXPECT_NE(message.find("set CANOPY_MASTER_PORT"), std::string::npos) << message;
  }
}

TEST(Rendezvous, GivenLocalRanksAreKept) {
  std::uint16_t port = free_port();
  auto exits = testing::run_processes(2, [&](int rank) {
    EnvMap env{{"RANK", std::to_string(rank)},
               {"WORLD_SIZE", "2"},
               {"LOCAL_RANK", std::to_string(rank)},
               {"LOCAL_WORLD_SIZE", "2"},
               {"MASTER_ADDR", "localhost"},
               {"MASTER_PORT", std::to_string(port)},
               {"CANOPY_HOST_ID", std::to_string(rank)}};  // would give local rank 0 of 1 if derived
    auto r = rendezvous(env, 20s);
    meet_and_check(r, 2, {0, 1}, {2, 2});
  });
  expect_all_ok(exits);
}

TEST(Rendezvous, FileStoreRanksFromPmiOnOneHost) {
  testing::TempDir dir;
  auto exits = testing::run_processes(3, [&](int rank) {
    EnvMap env{{"PMI_RANK", std::to_string(rank)},
               {"PMI_SIZE", "3"},
               {"CANOPY_STORE_FILE", dir.path() + "/store"},
               {"CANOPY_HOST_ID", "one-host"}};
    auto r = rendezvous(env, 20s);
    require(r.server == nullptr, "a FileStore rank hosts a server");
    meet_and_check(r, 3, {0, 1, 2}, {3, 3, 3});
  });
  expect_all_ok(exits);
}

// Network namespaces keep the machine's host name but cannot share memory: without CANOPY_HOST_ID, a rank
// in a namespace of its own is a host of its own (local rank 0 of 1), as a rank on another machine is.
TEST(Rendezvous, ARankInAnotherNetworkNamespaceIsAnotherHost) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a network namespace needs root";
  testing::TempDir dir;
  auto exits = testing::run_processes(3, [&](int rank) {
    if (rank == 2) require(::unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): {}", std::strerror(errno));
    EnvMap env{
        {"PMI_RANK", std::to_string(rank)}, {"PMI_SIZE", "3"}, {"CANOPY_STORE_FILE", dir.path() + "/store"}};
    auto r = rendezvous(env, 20s);
    meet_and_check(r, 3, {0, 1, 0}, {2, 2, 1});
  });
  expect_all_ok(exits);
  EXPECT_EQ(host_identity("named"), "named");  // CANOPY_HOST_ID still decides where it is set
}

TEST(Rendezvous, OneProcessWithoutALauncherGetsAPrivateStore) {
  auto r = rendezvous({}, 5s);
  EXPECT_EQ(r.info.rank, 0);
  EXPECT_EQ(r.info.world_size, 1);
  EXPECT_EQ(r.info.local_rank, 0);
  EXPECT_EQ(r.info.local_world_size, 1);
  ASSERT_NE(r.server, nullptr);
  r.store->set("k", "v");
  EXPECT_EQ(r.store->get("k", 1s), "v");
  EXPECT_EQ(r.store->timeout(), 5s);
}

TEST(Rendezvous, TheRestartRoundPrefixesEveryKey) {
  testing::TempDir dir;
  EnvMap env{{"CANOPY_RANK", "0"},
             {"CANOPY_WORLD_SIZE", "1"},
             {"CANOPY_STORE_FILE", dir.path()},
             {"CANOPY_RESTART_COUNT", "3"}};
  auto r = rendezvous(env, 5s);
  r.store->set("k", "v");
  auto base = open_file_store(dir.path());
  EXPECT_EQ(base->get("round/3/k", 1s), "v");
  EXPECT_TRUE(base->check({"round/3/rank/0", "round/3/host/0"}));
}

TEST(Rendezvous, TwoProcessesWithOneRankAreAConfigError) {
  testing::TempDir dir;
  EnvMap env{{"RANK", "1"},
             {"WORLD_SIZE", "2"},
             {"LOCAL_RANK", "0"},
             {"LOCAL_WORLD_SIZE", "1"},
             {"CANOPY_STORE_FILE", dir.path()}};
  auto first = rendezvous(env, 5s);
  try {
    rendezvous(env, 5s);
    FAIL() << "rank 1 was claimed twice";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("rank 1 is already claimed"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, AMissingRankIsATimeoutNamingIt) {
  testing::TempDir dir;
  EnvMap env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"CANOPY_STORE_FILE", dir.path()}};
  auto start = Clock::now();
  try {
    rendezvous(env, 300ms);
    FAIL() << "a group of 2 formed with 1 rank";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("host/0"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 5s);
}

// Forming a group costs each rank O(1) store requests, whatever the group's size: rank 0 gathers the P
// values in one GET_MANY.
TEST(AgreeThroughRankZero, CostsTwoRequestsPerRankAndThreeForRankZero) {
  constexpr int kRanks = 64;
  TcpStoreServer server("127.0.0.1", 0, "tok");
  std::vector<std::uint64_t> requests(kRanks);
  testing::run_threads(kRanks, [&](int rank) {
    auto base = connect_tcp_store("127.0.0.1", server.port(), "tok", 20s);
    base->set_timeout(20s);
    PrefixStore store(base, "round/0");
    std::string answer = agree_through_rank_zero(store, "layout", rank, kRanks, std::to_string(rank),
                                                 [](const std::vector<std::string>& all) {
                                                   std::string joined;
                                                   for (const auto& v : all) joined += v + ",";
                                                   return joined;
                                                 });
    require(answer.substr(0, 6) == "0,1,2,", "rank {} agreed on '{}'", rank, answer);
    requests[static_cast<std::size_t>(rank)] = store.requests_sent();
  });
  EXPECT_EQ(requests[0], 3u);  // it returns the answer it made without reading it back
  for (int rank = 1; rank < kRanks; ++rank) EXPECT_EQ(requests[static_cast<std::size_t>(rank)], 2u) << rank;
}

TEST(Rendezvous, AWrongTokenFailsTheRankClearly) {
  std::uint16_t port = free_port();
  TcpStoreServer other_job("", port, "other-job");
  EnvMap env{{"RANK", "1"},
             {"WORLD_SIZE", "2"},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", std::to_string(port)},
             {"CANOPY_JOB_TOKEN", "this-job"}};
  try {
    rendezvous(env, 5s);
    FAIL() << "joined another job's store";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("CANOPY_JOB_TOKEN"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace canopy::rendezvous
