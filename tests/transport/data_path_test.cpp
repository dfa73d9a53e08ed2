// The data path between real processes (and threads where a test needs to reach inside one process), over
// TCP and over shared memory alike: every test runs once per kind of link (DataPath/Tcp, DataPath/Shm).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <thread>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "common/log.hpp"
#include "tests/support/mesh_processes.hpp"
#include "tests/support/ranks.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/frame.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {
namespace {

using testing::error_from;
using testing::exchange_with_everyone;
using testing::expect_all_ok;
using testing::loopback_options;
using testing::p2p_envelope;
using testing::require;
using testing::wait_all;
using testing::wait_one;

using testing::LinkKind;
using RankBody = std::function<void(Transport& t)>;

class DataPath : public ::testing::TestWithParam<LinkKind> {
 protected:
  LinkKind kind() const { return GetParam(); }
  std::unique_ptr<Transport> connect(Store& store, int rank, int size, std::uint64_t comm_id,
                                     std::optional<std::chrono::microseconds> spin = std::nullopt) const {
    auto options = loopback_options(comm_id);
    options.spin = spin;
    auto mesh = testing::connect_loopback_mesh(kind(), store, rank, size, options);
    const std::string_view expected = testing::is_tcp(kind()) || size == 1 ? "tcp" : "shm+tcp";
    require(mesh->name() == expected, "rank {}: the mesh is {}, not {}", rank, mesh->name(), expected);
    return mesh;
  }
  // Forks `size` ranks that form the mesh and run `body`; returns how each ended.
  std::vector<testing::RankExit> run_mesh_processes(int size, std::uint64_t comm_id,
                                                    const RankBody& body) const {
    auto connect = [this, comm_id](Store& store, int rank, int n) {
      return this->connect(store, rank, n, comm_id);
    };
    return testing::run_mesh_processes(size, connect, body, std::chrono::seconds(60));
  }
};

TEST_P(DataPath, MeshOfTwoToFiveRanksAsProcesses) {
  for (int size = 2; size <= 5; ++size)
    expect_all_ok(
        run_mesh_processes(size, 200 + size, [&](Transport& t) { exchange_with_everyone(t, 200 + size); }));
}

TEST_P(DataPath, OddSizesRoundTripBitExactly) {
  constexpr std::uint64_t kComm = 3;
  const std::vector<std::size_t> sizes = {0, 1, 7, 4099, 65536 + 1, (std::size_t{1} << 20) + 3};
  expect_all_ok(
      run_mesh_processes(2, kComm, [&](Transport& t) { testing::round_trip_bit_exactly(t, kComm, sizes); }));
}

TEST_P(DataPath, BackToBackMessagesOfMixedSizesArriveIntact) {
  // Posted all at once, so frames are read ahead together and headers straddle reads: sizes around the
  // header (56 B) and the read-ahead buffer (64 KiB), large ones in between.
  constexpr std::uint64_t kComm = 12;
  const std::vector<std::size_t> sizes = {
      0, 1, 55, 56, 57, 3, 4099, 65535, 65536, 65537, 0, (1u << 20) + 3, 7, 131072, 65479, 1};
  expect_all_ok(run_mesh_processes(2, kComm, [&](Transport& t) {
    std::vector<std::vector<std::byte>> buffers;
    std::vector<OpId> ids;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      auto envelope = p2p_envelope(kComm, 1, static_cast<std::uint32_t>(i), sizes[i]);
      if (t.rank() == 0) {
        buffers.push_back(testing::random_bytes(sizes[i], 77 + i));
        ids.push_back(t.post_send(1, envelope, buffers.back()));
      } else {
        buffers.emplace_back(sizes[i], std::byte{0xEE});
        ids.push_back(t.post_recv(0, envelope, buffers.back()));
      }
    }
    wait_all(t, ids);
    if (t.rank() == 1)
      for (std::size_t i = 0; i < sizes.size(); ++i)
        require(testing::first_difference(buffers[i], 77 + i) == -1,
                "message {} ({} bytes) arrived corrupted", i, sizes[i]);
  }));
}

// The flags set when a message is posted reach its receiver; a message without payload brings none
// (its sender may post it before hearing anything), and each report is taken once.
TEST_P(DataPath, FrameFlagsReachTheReceiverWithThePayload) {
  constexpr std::uint64_t kComm = 13;
  expect_all_ok(run_mesh_processes(2, kComm, [&](Transport& t) {
    require(t.carries_flags(), "frames carry flags");
    const std::vector<std::size_t> sizes = {8, 0, 8, 8};
    const std::vector<std::uint8_t> flags = {0, kFlagRootInStream, kFlagRootInStream, 0};
    std::vector<std::byte> buffer(8);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      auto envelope = p2p_envelope(kComm, 1, static_cast<std::uint32_t>(i), sizes[i]);
      if (t.rank() == 0) {
        envelope.flags = flags[i];
        wait_all(t, {t.post_send(1, envelope, std::span<const std::byte>(buffer).first(sizes[i]))});
        continue;
      }
      wait_all(t, {t.post_recv(0, envelope, std::span<std::byte>(buffer).first(sizes[i]))});
      const std::uint8_t heard = t.take_arrived_flags();
      const std::uint8_t expected = sizes[i] > 0 ? flags[i] : 0;
      require(heard == expected, "message {} brought flags {:#x}, expected {:#x}", i, heard, expected);
      require(t.take_arrived_flags() == 0, "message {}'s flags were reported twice", i);
    }
  }));
}

TEST_P(DataPath, QuarterGibibyteRoundTripsBitExactly) {
  constexpr std::uint64_t kComm = 4;
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  constexpr std::uint64_t kSeed = 0xC0FFEE;
  expect_all_ok(run_mesh_processes(2, kComm, [&](Transport& t) {
    auto envelope = p2p_envelope(kComm, 1, 0, kBytes);
    std::vector<std::byte> buffer(kBytes);
    const int peer = 1 - t.rank();
    if (t.rank() == 0) {
      testing::fill_random(buffer, kSeed);
      wait_one(t, t.post_send(peer, envelope, buffer));
      std::memset(buffer.data(), 0, buffer.size());
      wait_one(t, t.post_recv(peer, envelope, buffer));
    } else {
      wait_one(t, t.post_recv(peer, envelope, buffer));
      long long bad = testing::first_difference(buffer, kSeed);
      require(bad == -1, "rank 1: byte {} of 256 MiB arrived corrupted", bad);
      wait_one(t, t.post_send(peer, envelope, buffer));
    }
    long long bad = testing::first_difference(buffer, kSeed);
    require(bad == -1, "rank {}: byte {} of the 256 MiB round trip differs", t.rank(), bad);
  }));
}

TEST_P(DataPath, ThousandsOfSmallMessagesKeepTheirOrderBetweenEveryPair) {
  constexpr std::uint64_t kComm = 5;
  constexpr std::uint32_t kMessages = 3000;
  expect_all_ok(run_mesh_processes(4, kComm, [&](Transport& t) {
    const int size = t.size();
    std::vector<std::vector<std::uint64_t>> out(size), in(size);
    std::size_t posted = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == t.rank()) continue;
      out[peer].resize(kMessages);
      in[peer].assign(kMessages, ~std::uint64_t{0});
      for (std::uint32_t i = 0; i < kMessages; ++i) out[peer][i] = (std::uint64_t(t.rank()) << 32) | i;
    }
    // Interleave the posts across peers, as a schedule would.
    for (std::uint32_t i = 0; i < kMessages; ++i)
      for (int peer = 0; peer < size; ++peer) {
        if (peer == t.rank()) continue;
        auto envelope = p2p_envelope(kComm, 1, i, 1);  // the step tags each message: order is checked twice
        t.post_send(peer, envelope, std::as_bytes(std::span(&out[peer][i], 1)));
        t.post_recv(peer, envelope, std::as_writable_bytes(std::span(&in[peer][i], 1)));
        posted += 2;
      }
    std::vector<OpId> done;
    done.reserve(posted);
    Deadline deadline = testing::test_deadline();
    while (done.size() < posted) require(t.progress(deadline, done), "rank {}: timed out", t.rank());
    for (int peer = 0; peer < size; ++peer)
      for (std::uint32_t i = 0; peer != t.rank() && i < kMessages; ++i)
        require(in[peer][i] == ((std::uint64_t(peer) << 32) | i), "rank {}: message {} from rank {} is {:x}",
                t.rank(), i, peer, in[peer][i]);
  }));
}

TEST_P(DataPath, MismatchIsReportedOnTheReceiverNamingBothSidesWithTheDestinationUntouched) {
  constexpr std::uint64_t kComm = 6;
  expect_all_ok(run_mesh_processes(2, kComm, [&](Transport& t) {
    log::set_level(log::Level::Error);
    if (t.rank() == 0) {
      Envelope sent{.comm_id = kComm,
                    .seq = 5,
                    .collective = Collective::Broadcast,
                    .dtype = DataType::Float32,
                    .count = 16};
      std::vector<std::byte> payload(64, std::byte{1});
      wait_one(t, t.post_send(1, sent, payload));
      return;
    }
    Envelope expected{.comm_id = kComm,
                      .seq = 5,
                      .collective = Collective::AllReduce,
                      .dtype = DataType::Float32,
                      .count = 1000};
    std::vector<std::byte> destination(4000, std::byte{0xAB});
    t.post_recv(0, expected, destination);
    Error e = error_from([&] { wait_one(t, 0); }, "receive of a mismatched message");
    std::string m = e.what();
    require(e.code() == ErrorCode::Mismatch, "code {} ({})", to_string(e.code()), m);
    require(
        m.find("rank 1 expected from rank 0: all_reduce #5 (float32 sum, 1000 elements") !=
                std::string::npos &&
            m.find("4000 bytes; rank 0 sent: broadcast #5 (float32 sum, 16 elements") != std::string::npos &&
            m.find("64 bytes") != std::string::npos,
        "message does not name both sides: {}", m);
    for (std::byte b : destination) require(b == std::byte{0xAB}, "the destination was written to");
    Error later = error_from([&] { t.post_recv(0, expected, destination); }, "post after a mismatch");
    require(later.code() == ErrorCode::Mismatch, "later post failed with {}", to_string(later.code()));
  }));
}

TEST_P(DataPath, KilledPeerTurnsIntoPeerFailedOnEverySurvivorAndOthersKeepWorking) {
  constexpr std::uint64_t kComm = 8;
  constexpr int kVictim = 2;
  auto exits = run_mesh_processes(3, kComm, [&](Transport& t) {
    log::set_level(log::Level::Error);
    exchange_with_everyone(t, kComm);  // the mesh works before the kill
    if (t.rank() == kVictim) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::raise(SIGKILL);
    }
    // Survivors wait on the victim: rank 0 for a message, rank 1 also with a send far larger than buffers.
    std::vector<std::byte> incoming(8);
    std::vector<std::byte> big(t.rank() == 1 ? (32 << 20) : 0);
    t.post_recv(kVictim, p2p_envelope(kComm, 2, 0, 8), incoming);
    if (!big.empty()) t.post_send(kVictim, p2p_envelope(kComm, 2, 1), big);
    auto start = Clock::now();
    Error e = error_from([&] { wait_one(t, 0, Deadline::after(std::chrono::seconds(20))); },
                         "waiting on a dead peer");
    auto waited = Clock::now() - start;
    std::string m = e.what();
    require(e.code() == ErrorCode::PeerFailed, "rank {}: code {} ({})", t.rank(), to_string(e.code()), m);
    const char* link = testing::is_tcp(kind()) ? "127.0.0.1:" : "shared memory on this host";
    require(m.find(fmt::format("rank {}: connection to rank {} ({}", t.rank(), kVictim, link)) !=
                std::string::npos,
            "rank {}: message does not name the dead rank: {}", t.rank(), m);
    require(waited < std::chrono::seconds(10), "rank {}: the failure took {} ms to surface", t.rank(),
            std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
    Error later =
        error_from([&] { t.post_send(kVictim, p2p_envelope(kComm, 3), {}); }, "post to a dead peer");
    require(later.code() == ErrorCode::PeerFailed, "later post failed with {}", to_string(later.code()));
    // The two survivors still talk.
    int other = 1 - t.rank();
    std::uint64_t mine = 40 + t.rank(), theirs = 0;
    wait_all(t, {t.post_send(other, p2p_envelope(kComm, 4), std::as_bytes(std::span(&mine, 1))),
                 t.post_recv(other, p2p_envelope(kComm, 4), std::as_writable_bytes(std::span(&theirs, 1)))});
    require(theirs == 40u + other, "survivors exchanged {} instead of {}", theirs, 40 + other);
  });
  EXPECT_TRUE(exits[0].ok()) << exits[0].describe();
  EXPECT_TRUE(exits[1].ok()) << exits[1].describe();
  EXPECT_EQ(exits[kVictim].signal, SIGKILL) << exits[kVictim].describe();
}

TEST_P(DataPath, AbortFromAnotherThreadWakesABlockedProgress) {
  constexpr std::uint64_t kComm = 9;
  testing::MemoryStore store;
  log::set_level(log::Level::Error);
  testing::run_threads(2, [&](int rank) {
    auto t = connect(store, rank, 2, kComm);
    std::vector<std::byte> incoming(8);
    t->post_recv(1 - rank, p2p_envelope(kComm, 1, 0, 8), incoming);
    std::thread aborter;
    if (rank == 0)
      aborter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        t->abort("the test gave up");
      });
    auto start = Clock::now();
    Error e =
        error_from([&] { wait_one(*t, 0, Deadline::after(std::chrono::seconds(20))); }, "blocked progress");
    auto waited = Clock::now() - start;
    if (aborter.joinable()) aborter.join();
    std::string m = e.what();
    if (rank == 0) {
      require(e.code() == ErrorCode::Aborted && m.find("the test gave up") != std::string::npos,
              "rank 0: {} {}", to_string(e.code()), m);
      Error later = error_from([&] { t->post_send(1, p2p_envelope(kComm, 2), {}); }, "post after abort");
      require(later.code() == ErrorCode::Aborted, "post after abort: {}", to_string(later.code()));
    } else {
      // The aborting rank shut its sockets: its peer learns at once instead of at its deadline.
      require(e.code() == ErrorCode::PeerFailed, "rank 1: {} {}", to_string(e.code()), m);
    }
    require(waited < std::chrono::seconds(10), "rank {}: woke after {} ms", rank,
            std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
  });
  log::set_level(log::Level::Warn);
}

TEST_P(DataPath, SpinningBeforeBlockingDeliversTheSameMessages) {
  testing::MemoryStore store;
  testing::run_threads(3, [&](int rank) {
    auto t = connect(store, rank, 3, 13, std::chrono::microseconds(50));
    for (int round = 0; round < 20; ++round) exchange_with_everyone(*t, 13);
  });
}

TEST_P(DataPath, SelfMessagesAndUnknownPeersAreInvalidArguments) {
  testing::MemoryStore store;
  testing::run_threads(2, [&](int rank) {
    auto t = connect(store, rank, 2, 10);
    for (int peer : {rank, -1, 2}) {
      Error e = error_from([&] { t->post_send(peer, p2p_envelope(10, 1), {}); }, "bad peer");
      require(e.code() == ErrorCode::InvalidArgument, "peer {}: {}", peer, to_string(e.code()));
    }
    exchange_with_everyone(*t, 10);
  });
}

TEST_P(DataPath, ProgressReturnsFalseAtTheDeadline) {
  testing::MemoryStore store;
  testing::run_threads(2, [&](int rank) {
    auto t = connect(store, rank, 2, 11);
    std::uint64_t value = 0, go = 1;
    auto envelope = p2p_envelope(11, 1, 0, 1);
    if (rank == 1) {  // sends only when told to, so rank 0's wait below can only time out
      wait_one(*t, t->post_recv(0, envelope, std::as_writable_bytes(std::span(&go, 1))));
      value = 71;
      wait_one(*t, t->post_send(0, envelope, std::as_bytes(std::span(&value, 1))));
      return;
    }
    std::vector<OpId> done;
    require(!t->progress(Deadline::after(std::chrono::milliseconds(50)), done),
            "progress with nothing posted");
    OpId recv = t->post_recv(1, envelope, std::as_writable_bytes(std::span(&value, 1)));
    require(!t->progress(Deadline::after(std::chrono::milliseconds(50)), done), "progress with nothing sent");
    require(done.empty(), "something completed");
    // The receive still waits, and completes once its message comes.
    wait_all(*t, {recv, t->post_send(1, envelope, std::as_bytes(std::span(&go, 1)))});
    require(value == 71u, "received {}", value);
  });
}

std::string link_name(const ::testing::TestParamInfo<LinkKind>& link) {
  return std::string(testing::to_string(link.param));
}

INSTANTIATE_TEST_SUITE_P(Links, DataPath,
                         ::testing::Values(LinkKind::Tcp, LinkKind::TcpOnFirstUse, LinkKind::Shm,
                                           LinkKind::ShmRingsOnly, LinkKind::ShmOnFirstUse),
                         link_name);

}  // namespace
}  // namespace canopy::transport
