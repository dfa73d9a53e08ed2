// What the transport tests share: loopback-only options, envelopes, reproducible random payloads.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "tests/support/ranks.hpp"
#include "transport/envelope.hpp"
#include "transport/link_mesh.hpp"
#include "transport/mesh_options.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/shm/unix_listener_book.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::testing {

// Tests never leave the loopback interface; `more` adds settings (CANOPY_IB_HCA=..., ...).
inline transport::MeshOptions loopback_mesh_options(std::uint64_t comm_id,
                                                    std::string token = "transport-test-token",
                                                    EnvMap more = {}) {
  more.emplace("CANOPY_SOCKET_IFNAME", "=lo");
  more.emplace("CANOPY_SOCKET_FAMILY", "ipv4");
  transport::MeshOptions options = transport::MeshOptions::from_settings(Settings::parse(more), comm_id);
  options.job_token = std::move(token);
  options.connect_timeout = std::chrono::seconds(20);
  return options;
}

inline transport::TcpOptions loopback_options(std::uint64_t comm_id,
                                              std::string token = "transport-test-token") {
  return transport::TcpOptions::from(loopback_mesh_options(comm_id, std::move(token)));
}

// Shared-memory options to go with TCP's `options` (the same comm id, token and deadline): `shm`'s rings,
// every rank on one host unless `hosts` says otherwise.
inline transport::ShmOptions shm_options_like(const transport::TcpOptions& options, int size,
                                              transport::ShmOptions shm = {}, std::vector<int> hosts = {}) {
  shm.comm_id = options.comm_id;
  shm.job_token = options.job_token;
  shm.connect_timeout = options.connect_timeout;
  shm.host_of_rank = hosts.empty() ? std::vector<int>(static_cast<std::size_t>(size), 0) : std::move(hosts);
  return shm;
}

// The links a data-path test runs over: TCP between every pair (made while the mesh forms, or each on
// first use), or shared memory (all ranks on one host), with large messages by single copy where the
// kernel allows it (the default), or every payload through the rings, or its links made on first use
// from the ranks' records (as a communicator's meshes make them).
enum class LinkKind { Tcp, TcpOnFirstUse, Shm, ShmRingsOnly, ShmOnFirstUse };
inline std::string_view to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::Tcp: return "Tcp";
    case LinkKind::TcpOnFirstUse: return "TcpOnFirstUse";
    case LinkKind::Shm: return "Shm";
    case LinkKind::ShmRingsOnly: return "ShmRingsOnly";
    case LinkKind::ShmOnFirstUse: return "ShmOnFirstUse";
  }
  return "?";
}
inline bool is_tcp(LinkKind kind) {
  return kind == LinkKind::Tcp || kind == LinkKind::TcpOnFirstUse;
}

// A mesh whose shared-memory and TCP links are made on first use, as a communicator's: each rank listens
// (UnixListenerBook) and publishes its record ("shm-record/<rank>") before it forms the mesh.
inline std::unique_ptr<transport::Transport> connect_shm_on_first_use(Store& store, int rank, int size,
                                                                      const transport::TcpOptions& options,
                                                                      transport::ShmOptions shm = {}) {
  const std::shared_ptr<Store> shared(std::shared_ptr<Store>(), &store);  // the test's outlives the mesh
  const transport::UnixListenerBook::Records records{shared,
                                                     [](int r) { return fmt::format("shm-record/{}", r); },
                                                     [](const std::string& record, int) { return record; }};
  auto book = std::make_shared<transport::UnixListenerBook>(rank, size, /*meshes=*/1, records);
  store.set(records.key_of(rank), book->part());
  shm = shm_options_like(options, size, shm);
  shm.unix_listener_book = std::move(book);
  shm.links_on_first_use = true;
  transport::TcpOptions tcp = options;
  tcp.store_for_first_use = shared;
  return transport::connect_shm_tcp_mesh(store, rank, size, tcp, shm);
}

inline std::unique_ptr<transport::Transport> connect_loopback_mesh(LinkKind kind, Store& store, int rank,
                                                                   int size,
                                                                   const transport::TcpOptions& options,
                                                                   transport::ShmOptions shm = {}) {
  if (kind == LinkKind::Tcp) return transport::connect_tcp_mesh(store, rank, size, options);
  if (kind == LinkKind::TcpOnFirstUse) {
    transport::TcpOptions lazy = options;
    lazy.store_for_first_use =
        std::shared_ptr<Store>(std::shared_ptr<Store>(), &store);  // the test's outlives it
    return transport::connect_tcp_mesh(store, rank, size, lazy);
  }
  if (kind == LinkKind::ShmOnFirstUse) return connect_shm_on_first_use(store, rank, size, options, shm);
  if (kind == LinkKind::ShmRingsOnly) shm.single_copy_bytes = 0;
  return transport::connect_shm_tcp_mesh(store, rank, size, options, shm_options_like(options, size, shm));
}

inline transport::Envelope p2p_envelope(std::uint64_t comm_id, std::uint64_t seq, std::uint32_t step = 0,
                                        std::uint64_t count = 0) {
  transport::Envelope e;
  e.comm_id = comm_id;
  e.seq = seq;
  e.step = step;
  e.count = count;
  return e;
}

// A generous deadline for one blocking step of a test: a correct run takes milliseconds.
inline Deadline test_deadline() {
  return Deadline::after(std::chrono::seconds(30));
}

// splitmix64: fast, reproducible bytes from a seed (so a receiver can check without a copy).
inline void fill_random(std::span<std::byte> out, std::uint64_t seed) {
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < out.size(); i += 8) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::memcpy(out.data() + i, &z, std::min<std::size_t>(8, out.size() - i));  // a word at a time: fast
  }
}

inline std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> bytes(n);
  fill_random(bytes, seed);
  return bytes;
}

// Index of the first byte that differs from what fill_random(seed) produces, or -1.
inline long long first_difference(std::span<const std::byte> data, std::uint64_t seed) {
  std::vector<std::byte> expected(std::min<std::size_t>(data.size(), std::size_t{1} << 20));
  // Regenerated 1 MiB at a time: the generator's state after k words is seed + k * its increment.
  for (std::size_t start = 0; start < data.size(); start += expected.size()) {
    std::size_t n = std::min(expected.size(), data.size() - start);
    std::uint64_t word_seed = seed + (start / 8) * 0x9E3779B97F4A7C15ULL;
    fill_random(std::span<std::byte>(expected.data(), n), word_seed);
    if (std::memcmp(expected.data(), data.data() + start, n) == 0) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (expected[i] != data[start + i]) return static_cast<long long>(start + i);
  }
  return -1;
}

// Every rank sends {from, to} to every other rank and checks what it receives.
inline void exchange_with_everyone(transport::Transport& t, std::uint64_t comm_id) {
  const int size = t.size();
  std::vector<std::array<int, 2>> outgoing(size), incoming(size, {-1, -1});
  std::vector<transport::OpId> ids;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == t.rank()) continue;
    outgoing[peer] = {t.rank(), peer};
    auto envelope = p2p_envelope(comm_id, 1);
    ids.push_back(t.post_send(peer, envelope, std::as_bytes(std::span(outgoing[peer]))));
    ids.push_back(t.post_recv(peer, envelope, std::as_writable_bytes(std::span(incoming[peer]))));
  }
  std::vector<transport::OpId> done;
  Deadline deadline = test_deadline();
  while (done.size() < ids.size())
    require(t.progress(deadline, done), "rank {}: exchange timed out", t.rank());
  for (int peer = 0; peer < size; ++peer) {
    if (peer == t.rank()) continue;
    require(incoming[peer][0] == peer && incoming[peer][1] == t.rank(), "rank {} got {}->{} from rank {}",
            t.rank(), incoming[peer][0], incoming[peer][1], peer);
  }
}

// Each forked rank must have ended well; a failure names the rank and how it ended.
inline void expect_all_ok(const std::vector<RankExit>& exits) {
  for (std::size_t rank = 0; rank < exits.size(); ++rank)
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

// The canopy::Error that `fn` throws; std::runtime_error naming `what` when it throws none.
template <typename Fn>
Error error_from(Fn&& fn, const char* what) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  throw std::runtime_error(fmt::format("{}: expected a canopy::Error, none was thrown", what));
}

// `fn` must fail with Error(PeerFailed) naming rank `peer`, and within 5 s: a peer found gone, not waited for.
template <typename Fn>
void expect_peer_failed_at_once(int peer, Fn&& fn) {
  const auto start = Clock::now();
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::PeerFailed) << e.what();
    EXPECT_NE(std::string(e.what()).find(fmt::format("rank {}", peer)), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

// Progresses until every one of `ids` is done; fails the test at the deadline.
inline void wait_all(transport::Transport& t, std::vector<transport::OpId> ids,
                     Deadline deadline = test_deadline()) {
  std::vector<transport::OpId> done;
  while (!ids.empty()) {
    require(t.progress(deadline, done), "rank {}: operation {} did not complete in time", t.rank(),
            ids.front());
    std::erase_if(ids,
                  [&](transport::OpId id) { return std::find(done.begin(), done.end(), id) != done.end(); });
  }
}
inline void wait_one(transport::Transport& t, transport::OpId id, Deadline deadline = test_deadline()) {
  wait_all(t, {id}, deadline);
}

// Rank 0 sends each of `sizes` to rank 1, which checks it and sends it back; rank 0 checks what came back.
inline void round_trip_bit_exactly(transport::Transport& t, std::uint64_t comm_id,
                                   const std::vector<std::size_t>& sizes) {
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::size_t n = sizes[i];
    auto envelope = p2p_envelope(comm_id, i, 0, n);
    if (t.rank() == 0) {
      auto original = random_bytes(n, 1000 + n);
      wait_one(t, t.post_send(1, envelope, original));
      std::vector<std::byte> back(n, std::byte{0x5A});
      wait_one(t, t.post_recv(1, envelope, back));
      require(back == original, "{} bytes did not come back bit-exactly", n);
    } else {
      std::vector<std::byte> received(n, std::byte{0x5A});
      wait_one(t, t.post_recv(0, envelope, received));
      const long long bad = first_difference(received, 1000 + n);
      require(bad < 0, "{} bytes arrived damaged at byte {}", n, bad);
      wait_one(t, t.post_send(0, envelope, received));
    }
  }
}

}  // namespace canopy::testing
