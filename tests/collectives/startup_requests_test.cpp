// The store requests a rank makes to start (issue 27: at most 4, whatever the group's size), counted exactly
// by the rank's own TcpStore client (Communicator::store_requests_sent) from Communicator::from_environment
// to the end of its first all-reduce, as canopy-startup-probe reports them. A rank publishes one record (its
// rank claim, host, CPUs, both TCP meshes' addresses and, under the default transport, whether it can use
// verbs and both meshes' Unix listeners), reads the host layout, the start-up probe's answer (the probe's
// sampled ranks agree around their ring instead) and, for the first dial or for its host's shared memory,
// its peers' records: one request for all it needs.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/store_server_process.hpp"

namespace canopy {
namespace {

using testing::require;

constexpr int kRanks = 16;  // twice the probe's sample of 8: ranks inside it and outside
constexpr int kSampled = 8;
const std::string kToken = "startup-requests-test";

// The environment canopy-run gives a rank, with the store hosted outside the ranks (as canopy-run does).
void launch_environment(testing::ScopedEnv& env, int rank, int size, std::uint16_t port) {
  testing::canopy_run_environment(env, rank, size, port, kToken);
}

// CANOPY_TRANSPORT=tcp, or the default (auto) with no RDMA device that it could choose, wherever the test
// runs: the ranks share memory where CANOPY_SHM_MAX_RANKS lets all of them, and use TCP where it is set
// below their number.
struct Transport {
  std::string name;  // "tcp", or "" for auto
  std::string shm_max_ranks;
  int launcher_host_ranks = kRanks;  // CANOPY_LOCAL_WORLD_SIZE: the launcher's word on who shares the host
};
const Transport kTcp{"tcp", "", kRanks};
const Transport kAutoSharingMemory{"", "", kRanks};
const Transport kAutoOverTcp{"", std::to_string(kRanks / 2), kRanks};
// The launcher says the host has blocks of 4 ranks where the layout finds all 16 on it.
const Transport kAutoSharingMemoryMisjudged{"", "", 4};

// Each rank's requests from from_environment() to the end of a first ring all-reduce, by rank.
std::vector<int> requests_to_start(const std::string& connect, const Transport& transport = kTcp) {
  testing::TempDir dir;
  testing::StoreServerProcess server(kToken);
  const std::uint16_t port = server.port();
  auto exits = testing::run_processes(kRanks, [&](int rank) {
    testing::ScopedEnv env;
    launch_environment(env, rank, kRanks, port);
    env.set("CANOPY_CONNECT", connect)
        .set("CANOPY_LOCAL_RANK", std::to_string(rank % transport.launcher_host_ranks))
        .set("CANOPY_LOCAL_WORLD_SIZE", std::to_string(transport.launcher_host_ranks));
    if (transport.name.empty())
      env.unset("CANOPY_TRANSPORT").set("CANOPY_IB_HCA", "=no_such_hca");
    else
      env.set("CANOPY_TRANSPORT", transport.name);
    if (transport.shm_max_ranks.empty())
      env.unset("CANOPY_SHM_MAX_RANKS");
    else
      env.set("CANOPY_SHM_MAX_RANKS", transport.shm_max_ranks);
    Communicator comm = Communicator::from_environment();
    const std::string expected =
        transport.name.empty() && transport.shm_max_ranks.empty() ? "shm+tcp" : "tcp";
    require(comm.transport_name() == expected, "rank {}: transport {}, not {}", rank, comm.transport_name(),
            expected);
    std::vector<float> data(kRanks, 1.0f);  // a block for every rank of the ring
    comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});
    for (float x : data) require(x == static_cast<float>(kRanks), "rank {}: the all-reduce gave {}", rank, x);
    std::ofstream(fmt::format("{}/{}", dir.path(), rank)) << comm.store_requests_sent();
  });
  std::vector<int> requests;
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
    int sent = -1;
    std::ifstream(fmt::format("{}/{}", dir.path(), rank)) >> sent;
    requests.push_back(sent);
  }
  fmt::print(
      "CANOPY_TRANSPORT={} CANOPY_SHM_MAX_RANKS={} CANOPY_LOCAL_WORLD_SIZE={} CANOPY_CONNECT={}: store "
      "requests "
      "by rank: {}\n",
      transport.name.empty() ? "(auto)" : transport.name,
      transport.shm_max_ranks.empty() ? "(default)" : transport.shm_max_ranks, transport.launcher_host_ranks,
      connect, fmt::join(requests, " "));
  return requests;
}

// Links on first use. Rank 0: its claiming record, the records in one get_many, the layout, the probe's
// answer (set). A sampled rank 1-7: its record, the layout, the records of the probe ring's neighbours it
// dials (rank 7 dials 6 and 0: one request); the probe's figures come around the ring. The others: record,
// layout, the probe's answer, and the record of the ring's lower neighbour (rank 15 dials 14 and 0: one).
TEST(StartUpRequests, AtMostFourARankWithLinksOnFirstUse) {
  const std::vector<int> requests = requests_to_start("lazy");
  for (int rank = 0; rank < kRanks; ++rank) {
    const int expected = rank == 0 ? 4 : rank < kSampled ? 3 : 4;
    EXPECT_EQ(requests[static_cast<std::size_t>(rank)], expected) << "rank " << rank;
  }
}

// Every link while the group forms: a rank reads every lower rank's record in one request, and the
// point-to-point mesh finds them read already.
TEST(StartUpRequests, AtMostFourARankWithEveryLinkAtOnce) {
  const std::vector<int> requests = requests_to_start("eager");
  for (int rank = 0; rank < kRanks; ++rank) {
    const int expected = rank == 0 ? 4 : rank < kSampled ? 3 : 4;
    EXPECT_EQ(requests[static_cast<std::size_t>(rank)], expected) << "rank " << rank;
  }
}

// The default transport on a host of more than CANOPY_SHM_MAX_RANKS ranks: TCP, with the same requests as
// CANOPY_TRANSPORT=tcp. Whether a rank can use verbs travels in its record, and the group's verdict comes
// back with the layout (no agreement of its own); the Unix listeners named in the record close unused.
TEST(StartUpRequests, AtMostFourARankUnderAutoOverTcp) {
  for (const char* connect : {"lazy", "eager"}) {
    const std::vector<int> requests = requests_to_start(connect, kAutoOverTcp);
    for (int rank = 0; rank < kRanks; ++rank) {
      const int expected = rank == 0 ? 4 : rank < kSampled ? 3 : 4;
      EXPECT_EQ(requests[static_cast<std::size_t>(rank)], expected) << connect << ", rank " << rank;
    }
  }
}

// The default transport on a host whose 16 ranks share memory, links on first use or all at once. Rank 0:
// its record, the records in one get_many (its host's among them), the layout (with the verbs verdict),
// the probe's answer (set). Every other rank: its record, then the layout and, in the same request, the
// records of the ranks its launcher says share its host (CANOPY_LOCAL_RANK, CANOPY_LOCAL_WORLD_SIZE): both
// meshes' Unix listener names and namespaces, and, being the same records, the TCP addresses that eager
// links read. A sampled rank 1-7 reads no more (the probe's ring runs over shared memory); the others read
// the probe's answer. The pairs meet over their Unix sockets by the records alone, and the host's cells
// agree over those sockets.
TEST(StartUpRequests, AtMostFourARankUnderAutoSharingMemory) {
  for (const char* connect : {"lazy", "eager"}) {
    const std::vector<int> requests = requests_to_start(connect, kAutoSharingMemory);
    for (int rank = 0; rank < kRanks; ++rank) {
      const int expected = rank == 0 ? 4 : rank < kSampled ? 2 : 3;
      EXPECT_EQ(requests[static_cast<std::size_t>(rank)], expected) << connect << ", rank " << rank;
    }
  }
}

// Where the launcher's word is wrong (blocks of 4 where the layout has all 16 ranks on the host), a rank
// reads the host's records it lacks in one request more after the layout: still at most 4.
TEST(StartUpRequests, AtMostFourARankUnderAutoSharingMemoryWhereTheLauncherMisjudgesTheHost) {
  const std::vector<int> requests = requests_to_start("lazy", kAutoSharingMemoryMisjudged);
  for (int rank = 0; rank < kRanks; ++rank) {
    const int expected = rank == 0 ? 4 : rank < kSampled ? 3 : 4;
    EXPECT_EQ(requests[static_cast<std::size_t>(rank)], expected) << "rank " << rank;
  }
}

// The rank's claim travels in its record: a second process given the same rank is told so at once, naming
// the holder, and the group forms with the first.
TEST(StartUpRequests, TwoProcessesWithOneRankAreAConfigErrorNamingTheHolder) {
  testing::TempDir dir;
  testing::StoreServerProcess server(kToken);
  const std::uint16_t port = server.port();
  // Processes 1 and 2 are both rank 1 of 2.
  auto exits = testing::run_processes(3, [&](int process) {
    testing::ScopedEnv env;
    launch_environment(env, process == 0 ? 0 : 1, 2, port);
    env.set("CANOPY_TRANSPORT", "tcp").set("CANOPY_TIMEOUT", "20");
    std::string outcome = "ok";
    try {
      Communicator comm = Communicator::from_environment();
      std::vector<float> one{1.0f};
      comm.all_reduce(std::span(one), ReduceOp::Sum);
      require(one[0] == 2.0f, "process {}: the all-reduce gave {}", process, one[0]);
    } catch (const Error& e) {
      outcome = fmt::format("{} {}", e.code() == ErrorCode::Config ? "config" : "other", e.what());
    }
    std::ofstream(fmt::format("{}/{}", dir.path(), process)) << outcome;
  });
  std::vector<std::string> outcomes;
  for (int process = 0; process < 3; ++process) {
    EXPECT_TRUE(exits[process].ok()) << "process " << process << " " << exits[process].describe();
    std::ifstream in(fmt::format("{}/{}", dir.path(), process));
    outcomes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_EQ(outcomes[0], "ok");
  const int loser = outcomes[1] == "ok" ? 2 : 1;
  EXPECT_EQ(outcomes[static_cast<std::size_t>(3 - loser)], "ok");
  const std::string& error = outcomes[static_cast<std::size_t>(loser)];
  EXPECT_EQ(error.rfind("config ", 0), 0u) << error;
  EXPECT_NE(error.find("rank 1 is already claimed by"), std::string::npos) << error;
  EXPECT_NE(error.find(" pid "), std::string::npos) << error;
}

}  // namespace
}  // namespace canopy
