// The host's cells (transport/shm/host_cells.hpp) between forked ranks: who gets them and how big, every byte
// of many calls through the reused slots, a broadcast's root running ahead without overwriting what a reader
// still reads, and the failures: a mismatched call, a peer that dies, an abort, the deadline. The one-shot
// collectives on top are checked with every other algorithm in communicator_test.cpp.
#include "transport/shm/host_cells.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "canopy/error.hpp"
#include "common/log.hpp"
#include "tests/support/mesh_processes.hpp"
#include "tests/transport/shm_test_support.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/shm/shm_mesh.hpp"

namespace canopy::transport {
namespace {

using testing::expect_all_ok;
using testing::require;
using testing::test_deadline;

ShmOptions cells_of(std::uint64_t cell_bytes, std::uint64_t budget = 1ull << 30) {
  ShmOptions options = rings(64 * 1024, 4096, budget);
  options.cell_bytes = cell_bytes;
  return options;
}

Envelope call_envelope(std::uint64_t seq, std::uint64_t count, std::uint32_t root = 0) {
  Envelope e = testing::p2p_envelope(77, seq, 0, count);
  e.collective = Collective::AllReduce;
  e.root = root;
  return e;
}

// The byte `i` of what `rank` writes in call `call`.
std::byte pattern(std::uint64_t call, int rank, std::size_t i) {
  return static_cast<std::byte>((call * 131 + static_cast<std::uint64_t>(rank) * 31 + i * 7) & 0xFF);
}

HostCells& cells_of(Transport& t) {
  HostCells* cells = t.host_cells();
  require(cells != nullptr, "rank {}: no host cells", t.rank());
  return *cells;
}

TEST(HostCells, EveryRankOfAGroupOnOneHostGetsThemAndNoneElsewhere) {
  expect_all_ok(run_shm_processes(3, 60, cells_of(256), [](Transport& t) {
    require(cells_of(t).cell_bytes() == 256 && cells_of(t).size() == 3, "rank {}: cells of {}", t.rank(),
            cells_of(t).cell_bytes());
  }));
  // Two hosts by the layout: no rank gets cells, and the mesh forms as before.
  expect_all_ok(run_shm_processes(
      3, 61, cells_of(256),
      [](Transport& t) { require(t.host_cells() == nullptr, "rank {}: cells across hosts", t.rank()); },
      {0, 0, 1}));
  // One rank wants none: no rank gets any, and nobody waits for an offer that never comes.
  auto connect = [](Store& store, int rank, int n) {
    auto options = testing::loopback_options(62);
    return connect_shm_tcp_mesh(store, rank, n, options,
                                testing::shm_options_like(options, n, cells_of(rank == 2 ? 0 : 256)));
  };
  expect_all_ok(testing::run_mesh_processes(3, connect, [](Transport& t) {
    require(t.host_cells() == nullptr, "rank {}: cells that a rank refused", t.rank());
  }));
}

// Each rank's cells take at most an eighth of its share of the budget: smaller cells first, then fewer slots.
TEST(HostCells, ABudgetTooSmallShrinksTheCellsThenTheSlotsOrLeavesNone) {
  EXPECT_EQ(CellShape::for_group(8, 2048, 32 << 20), (CellShape{64, 2048}));
  // The budget whose eighth of a rank's share is exactly that shape's part.
  auto budget_for = [](CellShape shape) { return 4 * 8 * shape.part_per_rank(4); };
  EXPECT_EQ(CellShape::for_group(4, 2048, budget_for({64, 512})), (CellShape{64, 512}));
  EXPECT_EQ(CellShape::for_group(4, 256, budget_for({32, 256})), (CellShape{32, 256}));
  EXPECT_EQ(CellShape::for_group(4, 2048, budget_for({8, 64})), (CellShape{8, 64}));
  EXPECT_EQ(CellShape::for_group(4, 2048, budget_for({8, 64}) - 32).slots, 0u);
  // 64 ranks on the default budget still get cells.
  EXPECT_GT(CellShape::for_group(64, 2048, 32 << 20).slots, 0u);
  // A process's groups hold their cells together against that eighth: the next group gets none.
  constexpr std::uint64_t kBudget = 8 << 20, kEighthOfShare = kBudget / 4 / 8;
  EXPECT_TRUE(ShmBudget::cells.reserve(kEighthOfShare - 100, kBudget, 4));
  EXPECT_FALSE(ShmBudget::cells.reserve(200, kBudget, 4));
  ShmBudget::cells.release(kEighthOfShare - 100);
  EXPECT_EQ(ShmBudget::cells.held(), 0u);
  expect_all_ok(run_shm_processes(4, 63, cells_of(2048, budget_for({64, 512})), [](Transport& t) {
    require(cells_of(t).cell_bytes() == 512 && cells_of(t).slots() == 64, "rank {}: {} slots of {} bytes",
            t.rank(), cells_of(t).slots(), cells_of(t).cell_bytes());
    require(ShmBudget::cells.held() > 0, "rank {}: its part of the cells is not accounted", t.rank());
  }));
  expect_all_ok(run_shm_processes(4, 64, cells_of(2048, 4096), [](Transport& t) {
    log::set_level(log::Level::Error);
    require(t.host_cells() == nullptr, "rank {}: cells beyond the budget", t.rank());
  }));
}

// Every rank writes and reads every cell of 600 calls (64 slots, each reused 9 times), some ranks late now
// and then, sizes from 1 byte to the whole cell: every byte arrives.
TEST(HostCells, ManyCallsReuseTheSlotsAndEveryByteArrives) {
  constexpr std::uint64_t kCell = 1024;
  expect_all_ok(run_shm_processes(4, 65, cells_of(kCell), [](Transport& t) {
    HostCells& cells = cells_of(t);
    for (std::uint64_t call = 1; call <= 600; ++call) {
      const std::size_t bytes = 1 + (call * 37) % kCell;
      if (call % 53 == static_cast<std::uint64_t>(t.rank()))
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      cells.start(call_envelope(call, bytes), bytes);
      std::byte* mine = cells.claim(test_deadline());
      for (std::size_t i = 0; i < bytes; ++i) mine[i] = pattern(call, t.rank(), i);
      cells.publish();
      for (int peer = 0; peer < t.size(); ++peer) {
        const std::byte* theirs = cells.wait_for(peer, test_deadline());
        for (std::size_t i = 0; i < bytes; ++i)
          require(theirs[i] == pattern(call, peer, i), "rank {}: call {}: byte {} of rank {}", t.rank(), call,
                  i, peer);
      }
      cells.finish();
    }
  }));
}

// The root publishes 300 calls as fast as it can (its 64 slots reused 4 times); the readers dawdle. Each
// still reads its call's bytes: the root waits for the slowest reader before it reuses a slot. The root's
// flags reach every reader.
TEST(HostCells, ABroadcastsRootRunsAheadButNeverOverwritesWhatAReaderStillReads) {
  constexpr std::size_t kBytes = 512;
  expect_all_ok(run_shm_processes(3, 66, cells_of(kBytes), [](Transport& t) {
    HostCells& cells = cells_of(t);
    for (std::uint64_t call = 1; call <= 300; ++call) {
      Envelope envelope = call_envelope(call, kBytes);
      envelope.flags = call % 2 == 0 ? kFlagRootInStream : 0;
      cells.start(envelope, kBytes);
      if (t.rank() == 0) {
        std::byte* mine = cells.claim(test_deadline());
        for (std::size_t i = 0; i < kBytes; ++i) mine[i] = pattern(call, 0, i);
        cells.publish();
      } else {
        if (call % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
        const std::byte* theirs = cells.wait_for(0, test_deadline());
        std::this_thread::yield();  // reading slowly
        for (std::size_t i = 0; i < kBytes; ++i)
          require(theirs[i] == pattern(call, 0, i), "rank {}: call {}: byte {} overwritten", t.rank(), call,
                  i);
        require(cells.heard_flags() == envelope.flags, "rank {}: call {}: heard flags {}", t.rank(), call,
                cells.heard_flags());
      }
      cells.finish();
    }
  }));
}

// Rank 1 calls with one element more: every rank that reads its cell, and rank 1 reading the others', gets
// Error(Mismatch) naming both calls.
TEST(HostCells, AMismatchedCallIsAnErrorOnEveryRankThatReadsIt) {
  expect_all_ok(run_shm_processes(3, 67, cells_of(256), [](Transport& t) {
    HostCells& cells = cells_of(t);
    const std::uint64_t count = t.rank() == 1 ? 9 : 8;
    cells.start(call_envelope(1, count), count);
    std::memset(cells.claim(test_deadline()), 1, count);
    cells.publish();
    const Error error = testing::error_from(
        [&] {
          for (int peer = 0; peer < t.size(); ++peer) cells.wait_for(peer, test_deadline());
        },
        "reading a mismatched call");
    require(error.code() == ErrorCode::Mismatch &&
                std::string(error.what()).find("expected from rank") != std::string::npos,
            "rank {}: {}", t.rank(), error.what());
  }));
}

// A peer killed before it publishes: the rank waiting for its cell learns it from the peer's socket, at
// once, not at the deadline; and one waiting on a deadline alone times out naming what it waited for.
TEST(HostCells, ADeadPeerIsPeerFailedAtOnceAndASilentOneATimeout) {
  auto exits = run_shm_processes(2, 68, cells_of(256), [](Transport& t) {
    HostCells& cells = cells_of(t);
    cells.start(call_envelope(1, 8), 8);
    if (t.rank() == 1) ::raise(SIGKILL);
    const auto started = std::chrono::steady_clock::now();
    try {
      cells.wait_for(1, test_deadline());
      require(false, "a dead peer's cell arrived");
    } catch (const PeerFailedError& e) {
      require(e.peer() == 1, "{}", e.what());
    }
    require(std::chrono::steady_clock::now() - started < std::chrono::seconds(5),
            "learned of the death late");
  });
  EXPECT_TRUE(exits[0].ok()) << exits[0].describe();
  EXPECT_EQ(exits[1].signal, SIGKILL) << exits[1].describe();

  expect_all_ok(run_shm_processes(2, 69, cells_of(256), [](Transport& t) {
    HostCells& cells = cells_of(t);
    cells.start(call_envelope(1, 8), 8);
    if (t.rank() == 0) {
      const Error error =
          testing::error_from([&] { cells.wait_for(1, Deadline::after(std::chrono::milliseconds(200))); },
                              "waiting past the deadline");
      require(error.code() == ErrorCode::Timeout &&
                  std::string(error.what()).find("timed out waiting for rank(s) 1, for their cell") !=
                      std::string::npos,
              "{}", error.what());
    }
    testing::exchange_with_everyone(t, 69);  // rank 1 stays until then
  }));
}

// A root that runs a whole round of slots ahead waits to reuse the first; past its deadline the error names
// the rank that never finished that call, not the one that did.
TEST(HostCells, ARootWaitingToReuseASlotNamesTheRankThatHoldsIt) {
  expect_all_ok(run_shm_processes(3, 71, cells_of(256), [](Transport& t) {
    HostCells& cells = cells_of(t);
    const std::uint64_t slots = cells.slots();
    if (t.rank() == 0) {
      for (std::uint64_t call = 1; call <= slots; ++call) {
        cells.start(call_envelope(call, 8), 8);
        std::memset(cells.claim(test_deadline()), 1, 8);
        cells.publish();
        cells.finish();
      }
      cells.start(call_envelope(slots + 1, 8), 8);
      const Error error = testing::error_from(
          [&] { cells.claim(Deadline::after(std::chrono::milliseconds(200))); }, "reusing a slot still read");
      require(
          error.code() == ErrorCode::Timeout &&
              std::string(error.what()).find("timed out waiting for rank(s) 2, for their end of the call") !=
                  std::string::npos,
          "{}", error.what());
    } else if (t.rank() == 1) {
      for (std::uint64_t call = 1; call <= slots; ++call) {
        cells.start(call_envelope(call, 8), 8);
        cells.wait_for(0, test_deadline());
        cells.finish();
      }
    }  // rank 2 reads nothing
    testing::exchange_with_everyone(t, 71);
  }));
}

TEST(HostCells, AnAbortWakesARankWaitingForACell) {
  expect_all_ok(run_shm_processes(2, 70, cells_of(256), [](Transport& t) {
    HostCells& cells = cells_of(t);
    cells.start(call_envelope(1, 8), 8);
    if (t.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // publishes nothing
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      t.abort("the test aborts");
    });
    const Error error =
        testing::error_from([&] { cells.wait_for(1, test_deadline()); }, "waiting through an abort");
    aborter.join();
    require(error.code() == ErrorCode::Aborted &&
                std::string(error.what()).find("the test aborts") != std::string::npos,
            "{}", error.what());
  }));
}

}  // namespace
}  // namespace canopy::transport
