// Shared-memory links made on first use, as a communicator's meshes make them: forming a group of ranks on
// one host makes no link but each rank's with rank 0 where the group gets host cells, a ring all-reduce
// then links each rank to its two neighbours only, and a peer whose listener is gone is PeerFailed when a
// message first needs it, not a wait.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "common/log.hpp"
#include "common/process_identity.hpp"
#include "tests/support/mesh_processes.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/shm_test_support.hpp"
#include "tests/transport/transport_test_support.hpp"

namespace canopy::transport {
namespace {

using testing::expect_all_ok;
using testing::require;

// The connected Unix packet sockets this process holds (not its listeners): its shared-memory links.
int shm_links_held() {
  int links = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    int domain = 0, type = 0, listening = 0;
    socklen_t bytes = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &bytes) != 0 || domain != AF_UNIX) continue;
    ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &bytes);
    ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &bytes);
    if (type == SOCK_SEQPACKET && listening == 0) ++links;
  }
  return links;
}

// A ring all-reduce (reduce-scatter, then all-gather) of one 64-bit integer a rank per rank: every rank
// talks to the next and the previous one only. Checks the sums.
void ring_all_reduce(Transport& t, std::uint64_t comm_id) {
  const int size = t.size(), rank = t.rank();
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  std::vector<std::uint64_t> chunks(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i)
    chunks[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(rank + 1) << i;
  auto chunk = [&](int i) { return static_cast<std::size_t>(((i % size) + size) % size); };
  for (int step = 0; step < 2 * (size - 1); ++step) {
    const bool reducing = step < size - 1;
    const std::size_t out = chunk(reducing ? rank - step : rank + 1 - (step - size + 1));
    const std::size_t in = chunk(reducing ? rank - step - 1 : rank - (step - size + 1));
    std::uint64_t received = 0;
    const Envelope envelope = testing::p2p_envelope(comm_id, 1, static_cast<std::uint32_t>(step), 1);
    testing::wait_all(t, {t.post_send(next, envelope, std::as_bytes(std::span(&chunks[out], 1))),
                          t.post_recv(previous, envelope, std::as_writable_bytes(std::span(&received, 1)))});
    chunks[in] = reducing ? chunks[in] + received : received;
  }
  const std::uint64_t ranks_summed = static_cast<std::uint64_t>(size) * (size + 1) / 2;
  for (int i = 0; i < size; ++i)
    require(chunks[static_cast<std::size_t>(i)] == ranks_summed << i, "rank {}: chunk {} is {}, not {}", rank,
            i, chunks[static_cast<std::size_t>(i)], ranks_summed << i);
}

std::vector<testing::RankExit> run_on_first_use(int size, std::uint64_t comm_id, const ShmOptions& shm,
                                                const testing::MeshBody& body) {
  auto connect = [&](Store& store, int rank, int n) {
    return testing::connect_shm_on_first_use(store, rank, n, testing::loopback_options(comm_id), shm);
  };
  return testing::run_mesh_processes(size, connect, body, std::chrono::seconds(60));
}

TEST(ShmFirstUse, ARingAllReduceOfEightRanksLinksEachToItsTwoNeighboursOnly) {
  constexpr std::uint64_t kComm = 81;
  ShmOptions no_cells = rings(64 * 1024, 4096);
  expect_all_ok(run_on_first_use(8, kComm, no_cells, [](Transport& t) {
    require(t.name() == "shm+tcp", "rank {}: a mesh of {}", t.rank(), t.name());
    require(shm_links_held() == 0, "rank {} holds {} links before any message", t.rank(), shm_links_held());
    ring_all_reduce(t, kComm);
    require(shm_links_held() == 2, "rank {} holds {} links after a ring all-reduce, not 2", t.rank(),
            shm_links_held());
    // The same links again; no rank ends it before every rank has begun it, so has counted its links: what
    // follows (which reaches every rank) cannot have reached one before it counted.
    ring_all_reduce(t, kComm + 1);
    testing::exchange_with_everyone(t, kComm);  // any pair may still meet, whoever sends first
    require(shm_links_held() == 7, "rank {} holds {} links after talking to everyone", t.rank(),
            shm_links_held());
  }));
}

// With host cells the group agrees on them over each rank's link with rank 0, made while it forms.
TEST(ShmFirstUse, WithHostCellsEachRankAlsoHoldsItsLinkWithRankZero) {
  constexpr std::uint64_t kComm = 83;
  ShmOptions cells = rings(64 * 1024, 4096);
  cells.cell_bytes = 256;
  expect_all_ok(run_on_first_use(8, kComm, cells, [](Transport& t) {
    require(t.host_cells() != nullptr, "rank {}: no host cells", t.rank());
    const int formed = t.rank() == 0 ? 7 : 1;
    require(shm_links_held() == formed, "rank {} holds {} links after forming, not {}", t.rank(),
            shm_links_held(), formed);
    ring_all_reduce(t, kComm);
    const std::set<int> talked{0, (t.rank() + 1) % 8, (t.rank() + 7) % 8};
    const int expected = t.rank() == 0 ? 7 : static_cast<int>(talked.size());
    require(shm_links_held() == expected, "rank {} holds {} links after a ring all-reduce, not {}", t.rank(),
            shm_links_held(), expected);
  }));
}

// Rank 0's record says this namespace, but its listener is gone: rank 1's first message to it fails at once.
TEST(ShmFirstUse, APeerWhoseListenerIsGoneIsPeerFailedAtTheFirstMessage) {
  testing::MemoryStore store;
  store.set("shm-record/0", this_network_namespace() + " canopy-gone-00000000");
  log::set_level(log::Level::Error);
  auto t =
      testing::connect_shm_on_first_use(store, 1, 2, testing::loopback_options(85), rings(64 * 1024, 4096));
  log::set_level(log::Level::Warn);
  std::uint64_t word = 1;
  testing::expect_peer_failed_at_once(0, [&] {
    testing::wait_all(*t,
                      {t->post_send(0, testing::p2p_envelope(85, 1), std::as_bytes(std::span(&word, 1)))});
  });
}

}  // namespace
}  // namespace canopy::transport
