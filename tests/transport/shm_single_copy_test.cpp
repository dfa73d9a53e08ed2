// Single copy between the ranks of a host: a large message goes straight from the sender's buffer into the
// receiver's (process_vm_readv). Exact around the threshold and into in-place receives; a send done only
// once the receiver has read it; a sender whose memory may not be read sends through the ring instead; a
// sender gone before its message was read is PeerFailed, never garbage.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "canopy/error.hpp"
#include "common/log.hpp"
#include "tests/transport/shm_test_support.hpp"

namespace canopy::transport {
namespace {

using testing::exchange_with_everyone;
using testing::expect_all_ok;
using testing::p2p_envelope;
using testing::require;
using testing::wait_all;

constexpr std::uint64_t kThreshold = 64 * 1024;

// Why this process may not read a child's memory, or empty when it may.
std::string why_no_single_copy() {
  static std::uint64_t word = 0x5EED;
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  std::uint64_t value = 0;
  iovec local{&value, sizeof(value)};
  iovec remote{&word, sizeof(word)};
  const long n = ::process_vm_readv(child, &local, 1, &remote, 1, 0);
  const int error = errno;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  if (n == sizeof(value) && value == word) return {};
  return fmt::format("process_vm_readv is not allowed here: {}", std::strerror(error));
}

#define SKIP_WITHOUT_SINGLE_COPY() \
  if (const std::string why = why_no_single_copy(); !why.empty()) GTEST_SKIP() << why

TEST(SingleCopy, SizesAroundTheThresholdArriveBitExactlyBothWaysAtOnce) {
  SKIP_WITHOUT_SINGLE_COPY();
  const std::vector<std::size_t> sizes = {
      kThreshold - 1,   kThreshold,      kThreshold + 1, 5, kInlineBytes + 1, (3u << 20) + 5, 0,
      (17u << 20) + 64, kThreshold + 63, kInlineBytes};
  // Through a tiny ring (cells and bytes full all the time) and through the default one.
  expect_all_ok(run_shm_processes(2, 51, rings(4096, 1024, 1ull << 30, kThreshold),
                                  [&](Transport& t) { exchange_sizes(t, 51, sizes); }));
  expect_all_ok(run_shm_processes(2, 52, rings(2 << 20, 256 << 10, 1ull << 30, kThreshold),
                                  [&](Transport& t) { exchange_sizes(t, 52, sizes); }));
}

// How long the send of `bytes` to rank 1 takes when rank 1 posts its receive 300 ms after rank 0 posts it.
std::vector<testing::RankExit> time_a_send_received_late(std::uint64_t comm_id, std::uint64_t single_copy,
                                                         bool expect_wait) {
  return run_shm_processes(2, comm_id, rings(2 << 20, 256 << 10, 1ull << 30, single_copy), [&](Transport& t) {
    exchange_with_everyone(t, comm_id);      // the rings exist
    constexpr std::size_t kBytes = 1 << 20;  // half the ring: the ring alone would take it at once
    auto envelope = p2p_envelope(comm_id, 2, 0, kBytes);
    if (t.rank() == 0) {
      const auto payload = testing::random_bytes(kBytes, 3);
      const auto start = Clock::now();
      wait_all(t, {t.post_send(1, envelope, payload)});
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      require((took >= std::chrono::milliseconds(250)) == expect_wait,
              "the send took {} ms; it should {}wait for the receiver", took.count(),
              expect_wait ? "" : "not ");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<std::byte> in(kBytes);
    wait_all(t, {t.post_recv(0, envelope, in)});
    require(testing::first_difference(in, 3) == -1, "the late receive is corrupted");
  });
}

TEST(SingleCopy, ASendIsDoneOnlyOnceTheReceiverHasReadIt) {
  SKIP_WITHOUT_SINGLE_COPY();
  expect_all_ok(time_a_send_received_late(53, kThreshold, true));
  expect_all_ok(time_a_send_received_late(54, 0, false));  // through the ring: done once written
}

TEST(SingleCopy, AnInPlaceReceiveTakesTheCopyPieceByPiece) {
  SKIP_WITHOUT_SINGLE_COPY();
  constexpr std::size_t kBytes = (5u << 20) + 36;
  expect_all_ok(run_shm_processes(2, 55, rings(4096, 1024, 1ull << 30, kThreshold), [&](Transport& t) {
    exchange_with_everyone(t, 55);
    auto envelope = p2p_envelope(55, 2, 0, kBytes / 4);
    if (t.rank() == 0) {
      const auto payload = testing::random_bytes(kBytes, 9);
      wait_all(t, {t.post_send(1, envelope, payload)});
      return;
    }
    receive_in_place_exactly(t, 0, envelope, kBytes, 9);
  }));
}

// Drops CAP_SYS_PTRACE from this process: it may then read only the memory of processes that let it.
void drop_ptrace_capability() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  require(::syscall(SYS_capget, &header, data) == 0, "capget: {}", std::strerror(errno));
  data[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
  data[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
  require(::syscall(SYS_capset, &header, data) == 0, "capset: {}", std::strerror(errno));
}

TEST(SingleCopy, ASenderWhoseMemoryMayNotBeReadSendsThroughTheRing) {
  SKIP_WITHOUT_SINGLE_COPY();
  // Rank 0 is not dumpable and rank 1 may not override that: rank 1 cannot read rank 0, rank 0 can read
  // rank 1. Both directions stay exact, one by single copy, one through its ring (the late receive shows
  // which: a single-copy send waits for it).
  auto lock_down = [](int rank) {
    if (rank == 0) require(::prctl(PR_SET_DUMPABLE, 0) == 0, "prctl: {}", std::strerror(errno));
    if (rank == 1) drop_ptrace_capability();
  };
  expect_all_ok(run_shm_processes(
      2, 56, rings(2 << 20, 256 << 10, 1ull << 30, kThreshold),
      [&](Transport& t) {
        log::set_level(log::Level::Warn);
        exchange_with_everyone(t, 56);
        exchange_sizes(t, 56, {kThreshold, 3 << 20, 7});
        constexpr std::size_t kBytes = 1 << 20;
        auto envelope = p2p_envelope(56, 3, 0, kBytes);
        const auto payload = testing::random_bytes(kBytes, 11 + t.rank());
        const auto start = Clock::now();
        wait_all(t, {t.post_send(1 - t.rank(), envelope, payload)});
        const auto took = Clock::now() - start;
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::vector<std::byte> in(kBytes);
        wait_all(t, {t.post_recv(1 - t.rank(), envelope, in)});
        require(testing::first_difference(in, 11 + (1 - t.rank())) == -1, "rank {}: corrupted", t.rank());
        // Rank 0's send goes through the ring (done at once); rank 1's is read from its memory by rank 0,
        // which receives only after its own sleep.
        const bool waited = took >= std::chrono::milliseconds(250);
        require(waited == (t.rank() == 1), "rank {}: the send {} for the receiver", t.rank(),
                waited ? "waited" : "did not wait");
      },
      {}, lock_down));
}

TEST(SingleCopy, ASenderGoneBeforeItsMessageWasReadIsPeerFailedNotGarbage) {
  SKIP_WITHOUT_SINGLE_COPY();
  constexpr std::size_t kBytes = 4 << 20;
  auto exits = run_shm_processes(2, 57, rings(2 << 20, 256 << 10, 1ull << 30, kThreshold), [&](Transport& t) {
    log::set_level(log::Level::Error);
    exchange_with_everyone(t, 57);
    auto envelope = p2p_envelope(57, 2, 0, kBytes);
    if (t.rank() == 0) {
      const auto payload = testing::random_bytes(kBytes, 13);
      t.post_send(1, envelope, payload);
      std::vector<OpId> done;
      t.progress(Deadline::after(std::chrono::milliseconds(20)), done);  // its cell is out: then it dies
      ::raise(SIGKILL);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<std::byte> in(kBytes, std::byte{0xEE});
    try {
      wait_all(t, {t.post_recv(0, envelope, in)});
      require(false, "a receive from a dead sender completed");
    } catch (const PeerFailedError& e) {
      require(e.peer() == 0, "{}", e.what());
    }
  });
  EXPECT_EQ(exits[0].signal, SIGKILL) << exits[0].describe();
  EXPECT_TRUE(exits[1].ok()) << exits[1].describe();
}

}  // namespace
}  // namespace canopy::transport
