// The verbs transport between real processes. Where this machine has no RDMA device the device tests
// skip, saying why; the selection tests run everywhere. The soft-RoCE harness (tests/rxe) runs this
// binary inside a QEMU guest with rdma_rxe, where nothing skips.
#include "transport/verbs/verbs_transport.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <thread>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "tests/support/mesh_processes.hpp"
#include "tests/support/ranks.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/select_transport.hpp"

namespace canopy::transport {
namespace {

using testing::error_from;
using testing::exchange_with_everyone;
using testing::expect_all_ok;
using testing::p2p_envelope;
using testing::require;
using testing::wait_all;
using testing::wait_one;

using RankBody = std::function<void(Transport& t)>;

VerbsOptions test_options(std::uint64_t comm_id) {
  VerbsOptions options = VerbsOptions::from_environment(EnvMap{});
  options.comm_id = comm_id;
  options.connect_timeout = std::chrono::seconds(30);
  return options;
}

std::string no_device_reason() {
  static const std::string reason = verbs_unavailable_reason(VerbsOptions::from_environment(EnvMap{}));
  return reason;
}

#define SKIP_WITHOUT_DEVICE()                                            \
  do {                                                                   \
    if (!no_device_reason().empty()) GTEST_SKIP() << no_device_reason(); \
  } while (0)

std::vector<testing::RankExit> run_mesh_processes(int size, const VerbsOptions& options, const RankBody& body,
                                                  std::chrono::seconds timeout = std::chrono::seconds(90)) {
  auto connect = [&options](Store& store, int rank, int n) {
    return connect_verbs_mesh(store, rank, n, options);
  };
  return testing::run_mesh_processes(size, connect, body, timeout);
}

// The threads of this process, from /proc/self/task.
int threads_of_this_process() {
  const auto tasks = std::filesystem::directory_iterator("/proc/self/task");
  return static_cast<int>(std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks)));
}

// ---- selection: runs everywhere ----

TEST(VerbsSelection, VerbsWithoutADeviceIsAClearConfigError) {
  if (no_device_reason().empty()) GTEST_SKIP() << "this machine has an RDMA device";
  testing::MemoryStore store;
  Error e =
      error_from([&] { connect_mesh(store, 0, 1, testing::loopback_mesh_options(1), TransportKind::Verbs); },
                 "connect_mesh(verbs)");
  EXPECT_EQ(e.code(), ErrorCode::Config);
  EXPECT_EQ(std::string(e.what()).rfind("no RDMA device", 0), 0u) << e.what();
}

TEST(VerbsSelection, AnHcaThatMatchesNothingIsNoDevice) {
  VerbsOptions options = VerbsOptions::from_environment(EnvMap{{"CANOPY_IB_HCA", "=no_such_hca"}});
  std::string reason = verbs_unavailable_reason(options);
  EXPECT_EQ(reason.rfind("no RDMA device", 0), 0u) << reason;
}

// Two ranks as threads with auto: both agree through the store and can talk, whichever was chosen.
TEST(VerbsSelection, AutoAgreesAcrossRanksAndWorks) {
  testing::MemoryStore store;
  testing::run_threads(2, [&](int rank) {
    auto t = connect_mesh(store, rank, 2, testing::loopback_mesh_options(7), TransportKind::Auto);
    exchange_with_everyone(*t, 7);
  });
}

// A rank that cannot use verbs makes the whole group take TCP under auto.
TEST(VerbsSelection, AutoFallsBackToTcpWhenAnyRankLacksVerbs) {
  testing::MemoryStore store;
  testing::run_threads(2, [&](int rank) {
    EnvMap settings;
    if (rank == 1) settings["CANOPY_IB_HCA"] = "=no_such_hca";
    auto t = connect_mesh(store, rank, 2, testing::loopback_mesh_options(8, "transport-test-token", settings),
                          TransportKind::Auto);
    exchange_with_everyone(*t, 8);
  });
  EXPECT_TRUE(store.check({"tcp/8/addr/0", "tcp/8/addr/1"}));
}

// ---- the transport on a device ----

TEST(VerbsTransport, MeshOfTwoAndThreeRanks) {
  SKIP_WITHOUT_DEVICE();
  for (int size = 2; size <= 3; ++size)
    expect_all_ok(run_mesh_processes(size, test_options(100 + size),
                                     [&](Transport& t) { exchange_with_everyone(t, 100 + size); }));
}

// Two emulated hosts of two ranks under auto: shared memory within each host and verbs between them, in one
// mesh driven by one progress loop, every rank talking to every other at once; CANOPY_TRANSPORT=verbs on
// the same layout keeps verbs for every pair, the same host's included.
TEST(VerbsTransport, SharedMemoryWithinAHostAndVerbsBetweenHosts) {
  SKIP_WITHOUT_DEVICE();
  for (const auto& [kind, name] :
       {std::pair{TransportKind::Auto, "shm+verbs"}, std::pair{TransportKind::Verbs, "verbs"}}) {
    const std::uint64_t comm = kind == TransportKind::Auto ? 12 : 13;
    int threads_before = 0;
    auto connect = [&](Store& store, int rank, int n) {
      threads_before = threads_of_this_process();
      MeshOptions options = testing::loopback_mesh_options(comm);
      options.host_of_rank = {0, 0, 1, 1};
      options.local_size = 2;
      auto t = connect_mesh(store, rank, n, options, kind);
      require(t->name() == name, "rank {}: the mesh is {}, not {}", rank, t->name(), name);
      require(!t->carries_flags(), "rank {}: a mesh with verbs links cannot carry the frames' flags", rank);
      return t;
    };
    expect_all_ok(testing::run_mesh_processes(
        4, connect,
        [&](Transport& t) {
          exchange_with_everyone(t, comm);
          // 1 MiB + 3 both ways with every peer at once: rings, single copies and RDMA writes side by side.
          constexpr std::size_t kBytes = (std::size_t{1} << 20) + 3;
          std::vector<std::vector<std::byte>> out(4), in(4);
          std::vector<OpId> ids;
          for (int peer = 0; peer < 4; ++peer) {
            if (peer == t.rank()) continue;
            out[peer] = testing::random_bytes(kBytes, 10 * t.rank() + peer);
            in[peer].assign(kBytes, std::byte{0});
            auto envelope = p2p_envelope(comm, 2, 0, kBytes);
            ids.push_back(t.post_recv(peer, envelope, in[peer]));
            ids.push_back(t.post_send(peer, envelope, out[peer]));
          }
          wait_all(t, ids);
          for (int peer = 0; peer < 4; ++peer)
            if (peer != t.rank())
              require(testing::first_difference(in[peer], 10 * peer + t.rank()) < 0,
                      "rank {}: message from {} damaged", t.rank(), peer);
          // One progress loop drives rings and queue pairs: neither set-up nor traffic started a thread.
          require(threads_of_this_process() == threads_before, "rank {}: {} threads, {} before the mesh",
                  t.rank(), threads_of_this_process(), threads_before);
        },
        std::chrono::seconds(90)));
  }
}

// Sizes around the staging slot (64 KiB) and far above the chunk size, so that chunking, the
// send-queue limit and the registration path all run. Both ways, bit-exact.
TEST(VerbsTransport, OddSizesRoundTripBitExactly) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kComm = 3;
  VerbsOptions options = test_options(kComm);
  options.max_chunk_bytes = 4096;  // 1 MiB = 256 writes: more than the send queue holds
  const std::vector<std::size_t> sizes = {0, 1, 7, 4099, 65536, 65536 + 1, (std::size_t{1} << 20) + 3};
  expect_all_ok(run_mesh_processes(2, options,
                                   [&](Transport& t) { testing::round_trip_bit_exactly(t, kComm, sizes); }));
}

// Many more messages in flight both ways than there are receive slots, staging slots or send-queue
// entries: credits and queues must hold everything back in order, with nothing lost or reordered.
TEST(VerbsTransport, ManyMessagesInFlightBothWaysStayInOrder) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kComm = 4;
  constexpr int kMessages = 300;
  VerbsOptions options = test_options(kComm);
  options.keep_registrations = true;
  expect_all_ok(run_mesh_processes(2, options, [&](Transport& t) {
    const int peer = 1 - t.rank();
    std::vector<std::vector<std::byte>> out(kMessages), in(kMessages);
    std::vector<OpId> ids;
    for (int i = 0; i < kMessages; ++i) {
      // Every tenth message is large enough to take the registration path.
      std::size_t n = i % 10 == 9 ? 100'000 + i : 8 + i;
      out[i] = testing::random_bytes(n, 50'000 * t.rank() + i);
      in[i].assign(n, std::byte{0});
      auto envelope = p2p_envelope(kComm, 1, static_cast<std::uint32_t>(i), n);
      ids.push_back(t.post_recv(peer, envelope, in[i]));
      ids.push_back(t.post_send(peer, envelope, out[i]));
    }
    wait_all(t, ids);
    for (int i = 0; i < kMessages; ++i)
      require(testing::first_difference(in[i], 50'000 * peer + i) < 0, "message {} damaged", i);
  }));
}

// Both ranks wait for their send to complete before posting the receive the other needs: the pattern
// of a schedule whose reduce overwrites the buffer it sends. TCP completes such sends once the kernel
// took the bytes; verbs must copy them aside rather than wait for a clear-to-send that never comes.
TEST(VerbsTransport, SendsCompleteBeforeTheirReceiveIsPosted) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kComm = 10;
  expect_all_ok(run_mesh_processes(2, test_options(kComm), [&](Transport& t) {
    const int peer = 1 - t.rank();
    std::uint64_t seq = 0;
    for (std::size_t n : {std::size_t{0}, std::size_t{8}, std::size_t{70'000}, std::size_t{1} << 20}) {
      ++seq;
      auto envelope = p2p_envelope(kComm, seq, 0, n);
      auto mine = testing::random_bytes(n, 7 * n + static_cast<std::size_t>(t.rank()));
      std::vector<std::byte> sent = mine;
      wait_one(t, t.post_send(peer, envelope, sent));
      std::fill(sent.begin(), sent.end(), std::byte{0});  // the caller owns the buffer again
      std::vector<std::byte> theirs(n);
      wait_one(t, t.post_recv(peer, envelope, theirs));
      require(testing::first_difference(theirs, 7 * n + static_cast<std::size_t>(peer)) < 0,
              "{} bytes from rank {} damaged", n, peer);
    }
  }));
}

// A rank whose last send completed (copied aside) and which then leaves at once: its teardown still
// delivers the bytes, as a closed TCP socket would.
TEST(VerbsTransport, ACompletedSendIsDeliveredAfterTheSenderLeaves) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kComm = 11;
  expect_all_ok(run_mesh_processes(2, test_options(kComm), [&](Transport& t) {
    auto envelope = p2p_envelope(kComm, 1, 0, 100'000);
    if (t.rank() == 0) {
      auto payload = testing::random_bytes(100'000, 42);
      wait_one(t, t.post_send(1, envelope, payload));
      return;  // the transport is destroyed here, before rank 1 asked for the bytes
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::vector<std::byte> received(100'000);
    wait_one(t, t.post_recv(0, envelope, received));
    require(testing::first_difference(received, 42) < 0, "the payload arrived damaged");
  }));
}

// A sender may see its send complete (copied aside) before the receiver refuses it; the refusal then
// surfaces on its next progress(). Either way both sides end with the same Mismatch.
TEST(VerbsTransport, MismatchIsCaughtOnBothSidesBeforeAnyByteIsWritten) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kComm = 5;
  for (bool receiver_first : {true, false}) {
    expect_all_ok(run_mesh_processes(2, test_options(kComm), [&](Transport& t) {
      std::vector<std::byte> buffer(1000, std::byte{0x11});
      Error e = error_from(
          [&] {
            if (t.rank() == 0) {
              if (receiver_first) std::this_thread::sleep_for(std::chrono::milliseconds(300));
              wait_one(t, t.post_send(1, p2p_envelope(kComm, 1, 0, 1000), buffer));
              std::vector<OpId> done;
              Deadline deadline = Deadline::after(std::chrono::seconds(10));
              while (t.progress(deadline, done)) {
              }
            } else {
              if (!receiver_first) std::this_thread::sleep_for(std::chrono::milliseconds(300));
              wait_one(t,
                       t.post_recv(0, p2p_envelope(kComm, 2, 0, 1000), buffer));  // another sequence number
            }
          },
          "mismatched message");
      require(e.code() == ErrorCode::Mismatch, "rank {}: expected Mismatch, got {}", t.rank(), e.what());
      require(std::string(e.what()).find("#1") != std::string::npos &&
                  std::string(e.what()).find("#2") != std::string::npos,
              "rank {}: the message should name both sides: {}", t.rank(), e.what());
      if (t.rank() == 1)
        for (std::byte b : buffer) require(b == std::byte{0x11}, "rank 1: the destination was written");
    }));
  }
}

TEST(VerbsTransport, AbortWakesABlockedProgress) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kComm = 6;
  expect_all_ok(run_mesh_processes(2, test_options(kComm), [&](Transport& t) {
    if (t.rank() == 1) {  // never sends, and stays until rank 0 is done
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    std::vector<std::byte> buffer(64);
    t.post_recv(1, p2p_envelope(kComm, 1), buffer);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      t.abort("test abort");
    });
    Error e = error_from(
        [&] {
          std::vector<OpId> done;
          t.progress(Deadline::after(std::chrono::seconds(60)), done);
        },
        "progress after abort");
    aborter.join();
    require(e.code() == ErrorCode::Aborted && std::string(e.what()).find("test abort") != std::string::npos,
            "expected the abort, got {}", e.what());
  }));
}

// A peer that exits: the survivor's receive (its clear-to-send goes to a queue pair that is gone) ends
// in PeerFailed when the device reports the failed send, or else progress() returns at its deadline;
// it never hangs past the deadline and never crashes. (On soft-RoCE the send to a destroyed queue pair
// has been seen to complete, leaving only the deadline: a silent peer, as the interface allows.)
TEST(VerbsTransport, PeerExitIsAnErrorNotAHang) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kComm = 9;
  expect_all_ok(run_mesh_processes(2, test_options(kComm), [&](Transport& t) {
    exchange_with_everyone(t, kComm);
    if (t.rank() == 1) _exit(0);  // gone, without any goodbye
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<std::byte> buffer(64);
    const auto limit = std::chrono::seconds(5);
    const auto start = Clock::now();
    const Deadline deadline = Deadline::after(limit);
    std::string outcome;
    try {
      t.post_recv(1, p2p_envelope(kComm, 2), buffer);
      std::vector<OpId> done;
      while (t.progress(deadline, done)) require(false, "a receive from an exited peer completed");
      outcome = "the deadline passed";
    } catch (const Error& e) {
      require(e.code() == ErrorCode::PeerFailed, "expected PeerFailed, got {}", e.what());
      outcome = e.what();
    }
    const auto waited = Clock::now() - start;
    require(waited < limit + std::chrono::seconds(3), "progress() overran its deadline by {} ms",
            std::chrono::duration_cast<std::chrono::milliseconds>(waited - limit).count());
    fmt::print("rank 0: receive from an exited peer: {} after {} ms\n", outcome,
               std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
  }));
}

}  // namespace
}  // namespace canopy::transport
