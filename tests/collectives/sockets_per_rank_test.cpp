// The sockets a rank holds (issue 27: at most 4 after a ring all-reduce, whatever the group's size): one
// listener that every TCP mesh of the rank shares (the communicator's two, a split's), the ring's two
// links, and its store connection, which its liveness monitor shares. Counted from /proc in
// each rank's own process, with the store hosted outside the ranks as canopy-run hosts it.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/socket_census.hpp"
#include "tests/support/store_server_process.hpp"

namespace canopy {
namespace {

using testing::require;

constexpr int kRanks = 8;
const std::string kToken = "sockets-per-rank-test";

TEST(SocketsPerRank, ARingHoldsTwoLinksOneListenerAndTheStorePointToPointAndSplitsAddOnlyTheirLinks) {
  testing::StoreServerProcess server(kToken);
  const std::uint16_t port = server.port();
  auto exits = testing::run_processes(kRanks, [&](int rank) {
    testing::ScopedEnv env;
    testing::canopy_run_environment(env, rank, kRanks, port, kToken);
    env.set("CANOPY_TRANSPORT", "tcp").set("CANOPY_HEARTBEAT_SECONDS", "0.2");
    Communicator comm = Communicator::from_environment();
    std::vector<float> data(kRanks, 1.0f);
    comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // its liveness monitor has beaten, too
    const testing::SocketCensus after_ring = testing::take_socket_census(port);
    require(after_ring.listening == 1 && after_ring.other_connected == 2 && after_ring.not_tcp == 0 &&
                after_ring.to_store == 1,
            "rank {} after a ring all-reduce: {}", rank, after_ring.describe());
    // Once this is done every rank has counted: a rank that went on to its point-to-point messages would
    // dial this one through the shared listener.
    comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});
    // A ring of point-to-point messages: that mesh's two links, on the same listener.
    const int next = (rank + 1) % kRanks, previous = (rank + kRanks - 1) % kRanks;
    std::vector<int> out{rank}, in{-1};
    Work sent = comm.send_async(std::as_bytes(std::span(out)), next, 3);
    comm.recv(std::as_writable_bytes(std::span(in)), previous, 3);
    sent.wait();
    require(in[0] == previous, "rank {} received {} from rank {}", rank, in[0], previous);
    const testing::SocketCensus after_p2p = testing::take_socket_census(port);
    require(after_p2p.listening == 1 && after_p2p.other_connected == 4 &&
                after_p2p.to_store == after_ring.to_store,
            "rank {} after point-to-point messages: {}", rank, after_p2p.describe());
    // A sub-communicator of every other rank (formed by its members alone: a split's agreement would use
    // the parent's links): its ring's two links, and still the one listener.
    comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});  // every rank counted
    std::vector<int> members;
    for (int r = rank % 2; r < kRanks; r += 2) members.push_back(r);
    Communicator half = comm.create_group(members, rank % 2 == 0 ? "evens" : "odds");
    std::vector<float> halves(kRanks / 2, 1.0f);
    half.all_reduce(std::span(halves), ReduceOp::Sum, {.algorithm = "ring"});
    require(halves[0] == kRanks / 2, "rank {}: the split's all-reduce gave {}", rank, halves[0]);
    comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});  // every split's ring is done
    const testing::SocketCensus after_split = testing::take_socket_census(port);
    require(after_split.listening == 1 && after_split.other_connected == 6 &&
                after_split.to_store == after_ring.to_store,
            "rank {} after a split's ring all-reduce: {}", rank, after_split.describe());
    // No rank exits (resetting its links) before every rank has counted.
    comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});
  });
  for (int rank = 0; rank < kRanks; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

}  // namespace
}  // namespace canopy
