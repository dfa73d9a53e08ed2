// A communicator's calls that fail, on every rank and clearly: mismatched collectives, another algorithm
// than the peers' through the host's cells, a silent rank's timeout with the flight recorder, what ended a
// communicator, and bad arguments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"

namespace canopy {
namespace {

using testing::require;

CommunicatorOptions test_options() {
  return testing::group_options("communicator-failure-test");
}

void run_group(int ranks, const std::function<void(Communicator&)>& body) {
  testing::run_group(ranks, body, test_options());
}

TEST(Communicator, MismatchedCollectivesFailOnEveryRankNamingBothSides) {
  for (const std::string algorithm : {"ring", "one-shot"}) {
    SCOPED_TRACE(algorithm);
    testing::TempDir dir;
    auto exits = testing::run_processes(3, [&](int rank) {
      CommunicatorOptions options = test_options();
      options.timeout = std::chrono::seconds(5);
      Communicator comm(open_file_store(dir.path()), rank, 3, options);
      std::vector<float> data(rank == 1 ? 200 : 100, 1.0f);
      try {
        comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = algorithm});
      } catch (const Error& e) {
        const std::string what = e.what();
        require(e.code() == ErrorCode::Mismatch || e.code() == ErrorCode::PeerFailed ||
                    e.code() == ErrorCode::Aborted,
                "unexpected error code: {}", what);
        require(
            what.find("100 elements") != std::string::npos && what.find("200 elements") != std::string::npos,
            "rank {}: the message does not name both calls: {}", rank, what);
        return;
      }
      throw std::runtime_error("no error");
    });
    for (const auto& exit : exits) EXPECT_TRUE(exit.ok()) << exit.describe();
  }
}

// One rank runs a call with messages where the others run it through the host's cells (or the reverse): no
// frame header reaches the other side, and each call's declaration (HostCells::declare) is what tells. Every
// rank fails within moments, far from its deadline, and a rank that found it names both algorithms. A rank
// whose side of the call needs nobody (a broadcast's root) returns, and fails at its next call; where the
// others come late, it is already in that call, which the others see it went on to.
TEST(Communicator, AnotherAlgorithmThanThePeersThroughTheCellsFailsAtOnce) {
  struct Case {
    Collective collective;
    int odd_rank;
    const char* odd;            // its algorithm
    const char* others;         // everyone else's
    bool others_late = false;   // the others start 200 ms late
    const char* odd_next = "";  // the odd rank's algorithm for the barrier after the call ("": auto)
  };
  const Case cases[] = {
      {Collective::AllReduce, 1, "ring", "one-shot"},
      {Collective::AllReduce, 0, "one-shot", "ring"},
      {Collective::Broadcast, 0, "flat", "one-shot"},
      {Collective::Broadcast, 0, "one-shot", "flat"},
      {Collective::Broadcast, 2, "flat", "one-shot"},
      {Collective::Reduce, 1, "one-shot", "binomial"},
      {Collective::Barrier, 2, "dissemination", "one-shot"},
      {Collective::Broadcast, 0, "flat", "one-shot", true, "dissemination"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(
        fmt::format("{}: rank {} {}, the others {}", to_string(c.collective), c.odd_rank, c.odd, c.others));
    testing::TempDir dir;
    auto exits = testing::run_processes(3, [&](int rank) {
      CommunicatorOptions options = test_options();
      options.timeout = std::chrono::seconds(60);
      Communicator comm(open_file_store(dir.path()), rank, 3, options);
      comm.barrier({.algorithm = "dissemination"});  // every pair's rings set up: no call waits for that
      std::vector<float> input(16, 1.0f), output(16);
      if (c.others_late && rank != c.odd_rank) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto started = std::chrono::steady_clock::now();
      try {
        comm.run({c.collective, input.data(), output.data(), 16, DataType::Float32, ReduceOp::Sum, 0},
                 {.algorithm = rank == c.odd_rank ? c.odd : c.others});
        comm.barrier({.algorithm = rank == c.odd_rank ? c.odd_next : ""});
      } catch (const Error& e) {
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        require(e.code() == ErrorCode::Mismatch || e.code() == ErrorCode::PeerFailed ||
                    e.code() == ErrorCode::Aborted,
                "rank {}: unexpected error: {}", rank, e.what());
        require(waited < 10, "rank {}: failed after {:.1f} s, as if at a deadline: {}", rank, waited,
                e.what());
        std::ofstream(fmt::format("{}/error-{}", dir.path(), rank)) << e.what();
        return;
      }
      throw std::runtime_error("no error");
    });
    for (const auto& exit : exits) EXPECT_TRUE(exit.ok()) << exit.describe();
    bool named = false;
    for (int rank = 0; rank < 3; ++rank) {
      std::stringstream what;
      what << std::ifstream(fmt::format("{}/error-{}", dir.path(), rank)).rdbuf();
      // A rank that went on to its next call is known to have run this one otherwise, not how.
      const auto says = [&](const std::string& words) { return what.str().find(words) != std::string::npos; };
      named = named || (says(c.odd) && says(c.others)) || says("went on to its next call") ||
              says(fmt::format("rank {} sent: barrier #2", c.odd_rank));
    }
    EXPECT_TRUE(named) << "no rank's error names both algorithms, or the odd rank's next call";
  }
}

TEST(Communicator, TimeoutNamesTheSilentRankAndPrintsTheFlightRecorder) {
  testing::TempDir dir;
  auto exits = testing::run_processes(2, [&](int rank) {
    CommunicatorOptions options = test_options();
    options.timeout = std::chrono::seconds(2);
    Communicator comm(open_file_store(dir.path()), rank, 2, options);
    std::vector<float> data(1000, 1.0f);
    comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});
    if (rank == 1) {  // stays silent for the second call
      std::this_thread::sleep_for(std::chrono::seconds(4));
      return;
    }
    auto begin = std::chrono::steady_clock::now();
    try {
      comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});
    } catch (const Error& e) {
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      std::string what = e.what();
      require(e.code() == ErrorCode::Timeout, "code {}: {}", to_string(e.code()), what);
      require(waited < 3.5, "took {} s for a 2 s deadline", waited);
      require(what.find("rank(s) 1") != std::string::npos, "does not name rank 1: {}", what);
      require(what.find("#1 all_reduce ring") != std::string::npos &&
                  what.find("FAILED after") != std::string::npos,
              "no flight recorder: {}", what);
      // The communicator now refuses calls rather than hang or corrupt.
      try {
        comm.barrier();
      } catch (const Error& again) {
        require(again.code() == ErrorCode::Timeout, "later call: {}", again.what());  // the first failure's
        return;
      }
      throw std::runtime_error("a call after the failure succeeded");
    }
    throw std::runtime_error("no timeout");
  });
  for (const auto& exit : exits) EXPECT_TRUE(exit.ok()) << exit.describe();
}

TEST(Communicator, FailureSaysWhatEndedTheCommunicator) {
  run_group(2, [](Communicator& comm) {
    require(!comm.failure(), "rank {}: a failure before any: {}", comm.rank(),
            comm.failure() ? comm.failure()->what() : "");
    comm.barrier();
    comm.abort("ended by the test");
    const std::optional<Error> failure = comm.failure();
    require(failure && failure->code() == ErrorCode::Aborted, "rank {}: no Aborted failure after abort()",
            comm.rank());
    require(std::string(failure->what()).find("ended by the test") != std::string::npos,
            "rank {}: the failure does not say why: {}", comm.rank(), failure->what());
    try {
      comm.barrier();
      require(false, "rank {}: a barrier after abort() succeeded", comm.rank());
    } catch (const Error& e) {
      require(e.code() == failure->code(), "rank {}: the later call raised {}, failure() says {}",
              comm.rank(), to_string(e.code()), to_string(failure->code()));
    }
  });
}

TEST(Communicator, BadArgumentsAreClearErrors) {
  run_group(2, [](Communicator& comm) {
    std::vector<float> data(4);
    try {
      comm.broadcast(std::span(data), 5);
      throw std::runtime_error("no error for root 5");
    } catch (const Error& e) {
      require(e.code() == ErrorCode::InvalidArgument, "code {}", to_string(e.code()));
    }
    try {
      comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "no-such-algorithm"});
      throw std::runtime_error("no error for an unknown algorithm");
    } catch (const Error& e) {
      require(std::string(e.what()).find("ring") != std::string::npos, "does not list the algorithms: {}",
              e.what());
    }
    comm.all_reduce(std::span(data));  // still usable: nothing was sent
  });
}

// Start-up learns where every rank runs: two "hosts" of two ranks each (CANOPY_HOST_ID), each rank
// its local rank from the layout, and the calibrated model, the same on every rank, says which hosts'
// ranks share cores.

}  // namespace
}  // namespace canopy
