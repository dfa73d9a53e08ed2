// A bounded prediction (PredictionBound: what the cost model passes once it has a best candidate) may
// stop early, but only where the whole simulation would have passed the bound too: then no choice
// changes. Every algorithm of the rooted and unrooted collectives, on a grid of group sizes, counts,
// layouts and links, against its unbounded prediction.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"

namespace canopy::collectives {
namespace {

// Every rank alone; one host of 2 cores (ranks queue for them); two hosts of 4 cores each; hosts of 4
// ranks and 4 cores.
std::vector<std::shared_ptr<const HostLayout>> layouts(int size) {
  auto one_host = std::make_shared<HostLayout>();
  one_host->host_of_rank.assign(static_cast<std::size_t>(size), 0);
  one_host->cores_of_host = {2};
  auto two_hosts = std::make_shared<HostLayout>();
  for (int r = 0; r < size; ++r) two_hosts->host_of_rank.push_back(r < size / 2 ? 0 : 1);
  two_hosts->cores_of_host = {4, 4};
  auto hosts_of_four = std::make_shared<HostLayout>();
  for (int r = 0; r < size; ++r) hosts_of_four->host_of_rank.push_back(r / 4);
  hosts_of_four->cores_of_host.assign(static_cast<std::size_t>((size + 3) / 4), 4);
  return {nullptr, one_host, two_hosts, hosts_of_four};
}

// The textbook link; and one whose first 64 KiB move fast, with a slower network between hosts.
std::vector<LinkModel> links() {
  LinkModel eager(5e-6, 1.0 / 1e9, 1.0 / 10e9);
  eager.within_host.beta_eager = 1.0 / 8e9;
  eager.within_host.eager_bytes = 64 << 10;
  eager.between_hosts = LinkCost{40e-6, 1.0 / 0.5e9, 1.0 / 0.5e9, 0};
  return {LinkModel(20e-6, 1.0 / 1e9, 1.0 / 10e9), eager};
}

struct Tally {
  int bounded = 0;
  int cut_off = 0;
};

// `bounded` against `full` under `bound`: cut off only past the bound, with a lower bound; else the same.
void expect_consistent(const Prediction& full, const Prediction& bounded, const PredictionBound& bound,
                       const std::string& what, Tally& tally) {
  ++tally.bounded;
  if (!bounded.cut_off) {
    EXPECT_EQ(bounded.seconds, full.seconds) << what;
    EXPECT_EQ(bounded.stream_seconds, full.stream_seconds) << what;
    EXPECT_EQ(bounded.messages, full.messages) << what;
    return;
  }
  ++tally.cut_off;
  EXPECT_TRUE(full.seconds > bound.seconds || full.stream_seconds > bound.stream_seconds)
      << what << ": cut off, but the whole simulation stays within the bound";
  EXPECT_LE(bounded.seconds, full.seconds) << what << ": not a lower bound";
  EXPECT_LE(bounded.stream_seconds, full.stream_seconds) << what << ": not a lower bound";
}

TEST(PredictionBound, StopsOnlyWhereTheWholeSimulationPassesTheBound) {
  Tally tally;
  for (Collective collective : {Collective::Broadcast, Collective::Reduce, Collective::AllReduce,
                                Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll}) {
    for (const Algorithm& algorithm : algorithms(collective)) {
      for (int size : {2, 5, 8, 17}) {
        for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{3000}, std::uint64_t{1} << 14}) {
          for (const auto& hosts : layouts(size)) {
            for (const LinkModel& link : links()) {
              CollectiveCall call{.collective = collective,
                                  .size = size,
                                  .count = count,
                                  .root = size / 2,
                                  .chunk_count = 1 << 11,
                                  .hosts = hosts};
              const Prediction full = predict(algorithm, call, 4, link);
              for (double fraction : {0.3, 0.9, 1.0, 1.5}) {
                const std::string what = fmt::format(
                    "{} {} P={} count={} layout={} alpha={} at {}x", to_string(collective), algorithm.name,
                    size, count, hosts ? hosts->cores_of_host.size() : 0, link.within_host.alpha, fraction);
                PredictionBound one_call;
                one_call.seconds = full.seconds * fraction;
                expect_consistent(full, predict(algorithm, call, 4, link, one_call), one_call, what, tally);
                PredictionBound stream;
                stream.stream_seconds = full.stream_seconds * fraction;
                expect_consistent(full, predict(algorithm, call, 4, link, stream), stream, what + " (stream)",
                                  tally);
                if (fraction >= 1.0) {
                  EXPECT_FALSE(predict(algorithm, call, 4, link, one_call).cut_off) << what;
                  EXPECT_FALSE(predict(algorithm, call, 4, link, stream).cut_off) << what;
                }
              }
            }
          }
        }
      }
    }
  }
  // The bounds rule out much of the grid below its time: the test sees both outcomes.
  EXPECT_GT(tally.cut_off, tally.bounded / 4);
  EXPECT_LT(tally.cut_off, tally.bounded);
}

// A ring all-reduce of a few bytes at 512 ranks is ruled out by its chain of 2(p-1) messages alone.
TEST(PredictionBound, ARingsChainRulesItOutWithoutItsSchedules) {
  const CollectiveCall call{.collective = Collective::AllReduce, .size = 512, .count = 1};
  const LinkModel link(10e-6, 1.0 / 1e9, 1.0 / 10e9);
  PredictionBound bound;
  bound.seconds = 100 * 10e-6;  // a tree's 2 lg p messages and more
  const Prediction ring = predict(*find_algorithm(Collective::AllReduce, "ring"), call, 4, link, bound);
  EXPECT_TRUE(ring.cut_off);
  EXPECT_DOUBLE_EQ(ring.seconds, 2 * 511 * 10e-6);
  EXPECT_EQ(ring.messages, 0u);  // nothing was simulated
}

}  // namespace
}  // namespace canopy::collectives
