// All-to-all, all-to-all-v, gather and scatter over real TCP between real processes: every algorithm
// exact on 1, 2, 3, 4, 5 and 8 ranks, empty blocks included; ranks that disagree get a Mismatch naming
// both sides.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "canopy/canopy.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using testing::require;

void run_group(int ranks, const std::function<void(Communicator&)>& body) {
  testing::run_group(ranks, body, testing::group_options("movement-test"));
}

// What rank `from` puts in element i of the block it sends to rank `to`: unique per (from, to, i).
std::int32_t value(int from, int to, std::size_t i) {
  return static_cast<std::int32_t>(from * 1'000'000 + to * 10'000 + static_cast<int>(i));
}

std::vector<std::string> names(Collective collective) {
  std::vector<std::string> all;
  for (const auto& algorithm : collectives::algorithms(collective)) all.emplace_back(algorithm.name);
  return all;
}

class EveryWorldSize : public ::testing::TestWithParam<int> {};

TEST_P(EveryWorldSize, AllToAllIsExact) {
  run_group(GetParam(), [](Communicator& comm) {
    const int p = comm.size();
    const int r = comm.rank();
    for (const std::string& algorithm : names(Collective::AllToAll)) {
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{70'000}}) {
        std::vector<std::int32_t> in(n * p), out(n * p, -1);
        for (int to = 0; to < p; ++to)
          for (std::size_t i = 0; i < n; ++i) in[to * n + i] = value(r, to, i);
        const auto before = in;
        comm.all_to_all(std::span<const std::int32_t>(in), std::span(out), {.algorithm = algorithm});
        for (int from = 0; from < p; ++from)
          for (std::size_t i = 0; i < n; ++i)
            require(out[from * n + i] == value(from, r, i), "{} n={}: block from {} element {} is {}",
                    algorithm, n, from, i, out[from * n + i]);
        require(in == before, "{}: the input changed", algorithm);
        // One buffer for both.
        comm.all_to_all(std::span<const std::int32_t>(in), std::span(in), {.algorithm = algorithm});
        require(in == out, "{} n={}: in place differs", algorithm, n);
      }
    }
  });
}

TEST_P(EveryWorldSize, AllToAllVIsExactWithEmptyBlocks) {
  run_group(GetParam(), [](Communicator& comm) {
    const int p = comm.size();
    const int r = comm.rank();
    // Rank a sends rank b (a + 2b + shift) % 4 * 3 elements: zero for some pairs, never the same for all;
    // successive calls differ in their counts alone, so none may reuse another's schedule.
    for (int shift : {0, 1, 0}) {
      auto count = [shift](int a, int b) { return static_cast<std::size_t>((a + 2 * b + shift) % 4 * 3); };
      std::vector<std::size_t> send_counts(p), recv_counts(p);
      for (int j = 0; j < p; ++j) {
        send_counts[j] = count(r, j);
        recv_counts[j] = count(j, r);
      }
      std::vector<std::int32_t> in,
          out(std::accumulate(recv_counts.begin(), recv_counts.end(), std::size_t{0}), -1);
      for (int to = 0; to < p; ++to)
        for (std::size_t i = 0; i < send_counts[to]; ++i) in.push_back(value(r, to, i));
      comm.all_to_all_v(std::span<const std::int32_t>(in), std::span<const std::size_t>(send_counts),
                        std::span(out), std::span<const std::size_t>(recv_counts));
      std::size_t at = 0;
      for (int from = 0; from < p; ++from)
        for (std::size_t i = 0; i < recv_counts[from]; ++i, ++at)
          require(out[at] == value(from, r, i), "shift {}: from rank {} element {}: {}", shift, from, i,
                  out[at]);
    }
  });
}

TEST_P(EveryWorldSize, GatherAndScatterAreExactFromEveryRoot) {
  run_group(GetParam(), [](Communicator& comm) {
    const int p = comm.size();
    const int r = comm.rank();
    for (int root = 0; root < p; ++root) {
      for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{40'000}}) {
        for (const std::string& algorithm : names(Collective::Gather)) {
          std::vector<std::int32_t> mine(n), all(r == root ? n * p : 0, -1);
          for (std::size_t i = 0; i < n; ++i) mine[i] = value(r, root, i);
          comm.gather(std::span<const std::int32_t>(mine), std::span(all), root, {.algorithm = algorithm});
          if (r == root)
            for (int from = 0; from < p; ++from)
              for (std::size_t i = 0; i < n; ++i)
                require(all[from * n + i] == value(from, root, i),
                        "gather {} root {} n={}: from {} element {}", algorithm, root, n, from, i);
        }
        for (const std::string& algorithm : names(Collective::Scatter)) {
          std::vector<std::int32_t> all(r == root ? n * p : 0), mine(n, -1);
          for (int to = 0; to < p && r == root; ++to)
            for (std::size_t i = 0; i < n; ++i) all[to * n + i] = value(root, to, i);
          comm.scatter(std::span<const std::int32_t>(all), std::span(mine), root, {.algorithm = algorithm});
          for (std::size_t i = 0; i < n; ++i)
            require(mine[i] == value(root, r, i), "scatter {} root {} n={}: element {}", algorithm, root, n,
                    i);
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Tcp, EveryWorldSize, ::testing::Values(1, 2, 3, 4, 5, 8));

// `call` on every rank, each with its own idea of the arguments: every rank learns of the disagreement.
void expect_mismatch(int ranks, const std::function<void(Communicator&)>& call, const std::string& needle) {
  run_group(ranks, [&](Communicator& comm) {
    try {
      call(comm);
      comm.barrier();  // a rank whose own call completed learns of the mismatch here
      require(false, "rank {}: no error", comm.rank());
    } catch (const Error& e) {
      require(std::string(e.what()).find(needle) != std::string::npos, "rank {}: {}", comm.rank(), e.what());
    }
  });
}

TEST(MovementMismatch, AllToAllBlocksOfDifferentSizes) {
  expect_mismatch(
      3,
      [](Communicator& comm) {
        const std::size_t n = comm.rank() == 2 ? 5 : 4;
        std::vector<float> in(n * 3), out(n * 3);
        comm.all_to_all(std::span<const float>(in), std::span(out));
      },
      "mismatch");
}

TEST(MovementMismatch, AllToAllVCountsThatDisagree) {
  expect_mismatch(
      2,
      [](Communicator& comm) {
        // Rank 0 sends rank 1 three elements; rank 1 expects four.
        std::vector<std::size_t> sends =
            comm.rank() == 0 ? std::vector<std::size_t>{1, 3} : std::vector<std::size_t>{2, 1};
        std::vector<std::size_t> recvs =
            comm.rank() == 0 ? std::vector<std::size_t>{1, 2} : std::vector<std::size_t>{4, 1};
        std::vector<float> in(std::accumulate(sends.begin(), sends.end(), std::size_t{0}));
        std::vector<float> out(std::accumulate(recvs.begin(), recvs.end(), std::size_t{0}));
        comm.all_to_all_v(std::span<const float>(in), std::span<const std::size_t>(sends), std::span(out),
                          std::span<const std::size_t>(recvs));
      },
      "mismatch");
}

// The flat gather's root sends every rank an empty message to tell two believed roots apart; the binomial
// one sends nothing of the kind, and on one host each call's declaration in the host's cells tells them apart,
// long before the deadline.
TEST(MovementMismatch, GatherWithDifferentRoots) {
  for (const std::string algorithm : {"flat", "binomial"}) {
    const auto started = std::chrono::steady_clock::now();
    expect_mismatch(
        3,
        [&](Communicator& comm) {
          const int root = comm.rank() == 1 ? 1 : 0;
          std::vector<float> mine(4), all(12);
          comm.gather(std::span<const float>(mine), std::span(all), root, {.algorithm = algorithm});
        },
        "root 1");
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10)) << algorithm;
  }
}

TEST(MovementMismatch, ScatterWithDifferentTypes) {
  expect_mismatch(
      2,
      [](Communicator& comm) {
        if (comm.rank() == 0) {
          std::vector<float> all(8), mine(4);
          comm.scatter(std::span<const float>(all), std::span(mine), 0);
        } else {
          std::vector<std::int32_t> all, mine(4);
          comm.scatter(std::span<const std::int32_t>(all), std::span(mine), 0);
        }
      },
      "float32");
}

TEST(MovementArguments, WrongSizesAreInvalidArguments) {
  run_group(2, [](Communicator& comm) {
    std::vector<float> three(3), four(4);
    auto expect_invalid = [](const std::function<void()>& call, const char* what) {
      try {
        call();
        require(false, "{}: accepted", what);
      } catch (const Error& e) {
        require(e.code() == ErrorCode::InvalidArgument, "{}: {}", what, e.what());
      }
    };
    expect_invalid([&] { comm.all_to_all(std::span<const float>(three), std::span(three)); }, "odd blocks");
    expect_invalid([&] { comm.gather(std::span<const float>(four), std::span(four), comm.rank()); },
                   "gather");
    expect_invalid([&] { comm.scatter(std::span<const float>(three), std::span(four), comm.rank()); },
                   "scatter");
    std::vector<std::size_t> counts{1};
    expect_invalid(
        [&] {
          comm.all_to_all_v(std::span<const float>(three), std::span<const std::size_t>(counts),
                            std::span(three), std::span<const std::size_t>(counts));
        },
        "counts");
    comm.barrier();
  });
}

}  // namespace
}  // namespace canopy
