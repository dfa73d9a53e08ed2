// What the shared-memory tests share: rings of a chosen size, ranks forked onto one host, and an exchange of
// many sizes at once checked bit for bit.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "tests/support/mesh_processes.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/shm/shm_mesh.hpp"

namespace canopy::transport {

// `single_copy_bytes` 0: every payload through the ring. No host cells: the budget is the rings' alone.
inline ShmOptions rings(std::uint64_t ring_bytes, std::uint64_t slot_bytes, std::uint64_t budget = 1ull << 30,
                        std::uint64_t single_copy_bytes = 0) {
  ShmOptions options;
  options.cell_bytes = 0;
  options.single_copy_bytes = single_copy_bytes;
  options.ring_bytes = ring_bytes;
  options.slot_bytes = slot_bytes;
  options.host_budget_bytes = budget;
  return options;
}

// Forks ranks on one host (by the layout, unless `hosts` says otherwise) meeting through a store server.
inline std::vector<testing::RankExit> run_shm_processes(int size, std::uint64_t comm_id,
                                                        const ShmOptions& shm, const testing::MeshBody& body,
                                                        std::vector<int> hosts = {},
                                                        const std::function<void(int)>& before = {}) {
  auto connect = [&](Store& store, int rank, int n) {
    if (before) before(rank);
    auto options = testing::loopback_options(comm_id);
    return connect_shm_tcp_mesh(store, rank, n, options, testing::shm_options_like(options, n, shm, hosts));
  };
  return testing::run_mesh_processes(size, connect, body, std::chrono::seconds(60));
}

// Every message of `sizes` both ways at once, all posted up front, each checked bit for bit.
inline void exchange_sizes(Transport& t, std::uint64_t comm_id, const std::vector<std::size_t>& sizes) {
  const int peer = 1 - t.rank();
  std::vector<std::vector<std::byte>> out, in;
  std::vector<OpId> ids;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto envelope = testing::p2p_envelope(comm_id, 1, static_cast<std::uint32_t>(i), sizes[i]);
    out.push_back(testing::random_bytes(sizes[i], 100 * i + t.rank()));
    in.emplace_back(sizes[i], std::byte{0xEE});
    ids.push_back(t.post_send(peer, envelope, out.back()));
    ids.push_back(t.post_recv(peer, envelope, in.back()));
  }
  testing::wait_all(t, ids);
  for (std::size_t i = 0; i < sizes.size(); ++i)
    testing::require(testing::first_difference(in[i], 100 * i + peer) == -1,
                     "rank {}: message {} ({} bytes) corrupted", t.rank(), i, sizes[i]);
}

// Pieces in order, each a whole number of elements, at the ring's memory; the header is checked before.
class RecordingSink final : public PieceSink {
 public:
  void consume(std::uint64_t offset, std::span<const std::byte> piece) override {
    testing::require(offset == bytes.size(), "a piece at {} after {} bytes", offset, bytes.size());
    testing::require(piece.size() % 4 == 0 || offset + piece.size() == expected, "a piece of {} bytes",
                     piece.size());
    bytes.insert(bytes.end(), piece.begin(), piece.end());
    ++pieces;
  }
  std::vector<std::byte> bytes;
  std::uint64_t expected = 0;
  int pieces = 0;
};

// Receives `bytes` from `peer` in place, and checks that they are random_bytes(bytes, seed).
inline RecordingSink receive_in_place_exactly(Transport& t, int peer, const Envelope& envelope,
                                              std::uint64_t bytes, std::uint64_t seed) {
  testing::require(t.receives_in_place(peer), "no in-place receive over shared memory");
  RecordingSink sink;
  sink.expected = bytes;
  testing::wait_all(t, {t.post_recv_in_place(peer, envelope, bytes, sink)});
  testing::require(sink.bytes.size() == bytes && testing::first_difference(sink.bytes, seed) == -1,
                   "{} bytes came in place, not the {} sent", sink.bytes.size(), bytes);
  return sink;
}

}  // namespace canopy::transport
