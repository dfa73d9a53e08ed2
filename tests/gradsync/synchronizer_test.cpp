// The GradientSynchronizer between forked processes over real TCP: averages land in place for every
// floating-point type, buckets launch in bucket order whatever order the hooks fire in, no-sync steps do
// not communicate and the next step all-reduces the sums, broadcast_parameters copies rank 0's weights or
// names the first difference, misuse gets an error, and buckets are rebuilt from rank 0's arrival order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "canopy/canopy.hpp"
#include "canopy/gradsync.hpp"
#include "collectives/kernels/reduce_kernels.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using testing::require;

CommunicatorOptions test_options() {
  return testing::group_options("gradsync-test");
}

void run_group(int ranks, const std::function<void(Communicator&)>& body) {
  testing::run_group(ranks, body, test_options(), std::chrono::seconds(60));
}

// Gradient g of rank r holds integers, so sums are exact and the expected average is sum * (1/world).
float value(int rank, std::size_t gradient, std::size_t i) {
  return static_cast<float>((rank + 1) * 3 + static_cast<int>(gradient * 7 + i % 13) - 20);
}

// Small caps so that six gradients make several buckets.
GradSyncOptions small_buckets() {
  GradSyncOptions options;
  options.first_bucket_bytes = 4096;
  options.bucket_bytes = 16384;
  return options;
}

const std::vector<std::size_t> kSizes{1000, 3, 4096, 17, 2500, 1};

// Three ranks (so that the division by the world size rounds), three steps, hooks in a different order on
// every rank and step; with `options` deciding which gradients share buckets and which are all-reduced
// where they lie.
// Returns the buckets.
std::vector<std::vector<std::size_t>> check_averages(Communicator& comm, const GradSyncOptions& options) {
  const int p = comm.size(), r = comm.rank();
  std::vector<std::vector<float>> grads;
  for (std::size_t g = 0; g < kSizes.size(); ++g) grads.emplace_back(kSizes[g]);
  GradientSynchronizer sync(comm, options);
  for (std::size_t g = 0; g < grads.size(); ++g)
    sync.add("g" + std::to_string(g), tensor_view(std::span(grads[g])));
  require(sync.buckets().size() >= 3, "expected several buckets, got {}", sync.buckets().size());
  for (int step = 0; step < 3; ++step) {
    for (std::size_t g = 0; g < grads.size(); ++g)
      for (std::size_t i = 0; i < grads[g].size(); ++i)
        grads[g][i] = value(r, g, i) + static_cast<float>(step);
    // Each rank fires its hooks in a different order: the launches must still agree.
    std::vector<std::size_t> order(grads.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(r * 10 + step)));
    for (std::size_t g : order) sync.mark_ready(g);
    sync.finish();
    for (std::size_t g = 0; g < grads.size(); ++g)
      for (std::size_t i = 0; i < grads[g].size(); ++i) {
        float sum = 0;
        for (int k = 0; k < p; ++k) sum += value(k, g, i) + static_cast<float>(step);
        float expected = sum / static_cast<float>(p);
        require(grads[g][i] == expected, "step {} gradient {}[{}]: {} != {}", step, g, i, grads[g][i],
                expected);
      }
  }
  GradSyncStats stats = sync.stats();
  require(stats.synced_steps == 3 && stats.bucket_all_reduces == 3 * sync.buckets().size(),
          "stats: {} steps, {} all-reduces", stats.synced_steps, stats.bucket_all_reduces);
  require(stats.buckets_done_before_finish <= stats.bucket_all_reduces && stats.finish_wait_seconds >= 0,
          "stats: {} of {} buckets done before finish()", stats.buckets_done_before_finish,
          stats.bucket_all_reduces);
  return sync.buckets();
}

TEST(GradientSynchronizer, AveragesInPlaceWhicheverOrderTheHooksFire) {
  run_group(3, [](Communicator& comm) { check_averages(comm, small_buckets()); });
}

// Gradients of at least in_place_bytes (here 4096 and 2500 floats) are all-reduced where they lie, each on
// its own, averaged by the all-reduce: the same values, rounded the same way, as through a bucket.
TEST(GradientSynchronizer, LargeGradientsAreAveragedWhereTheyLie) {
  run_group(3, [](Communicator& comm) {
    GradSyncOptions options = small_buckets();
    options.in_place_bytes = 8000;
    auto buckets = check_averages(comm, options);
    // Gradient 4 (10000 B) would share a 16 KiB bucket with gradient 3; in place it is alone.
    require(std::find(buckets.begin(), buckets.end(), std::vector<std::size_t>{4}) != buckets.end() &&
                buckets.size() == 5,
            "gradient 4 is not in a bucket of its own: {} buckets", buckets.size());
  });
}

// Through buckets (the copy out divides) and in place (the all-reduce's Avg divides): the same values.
class HalfPrecisionAndFloat64 : public ::testing::TestWithParam<bool> {};

TEST_P(HalfPrecisionAndFloat64, Averaged) {
  const bool in_place = GetParam();
  run_group(2, [in_place](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::uint16_t> half(300), bf(200);
    std::vector<double> wide(100);
    for (std::size_t i = 0; i < half.size(); ++i)
      half[i] = collectives::float_to_half(static_cast<float>(r + i % 7));
    for (std::size_t i = 0; i < bf.size(); ++i)
      bf[i] = collectives::float_to_bfloat16(static_cast<float>(2 * r + 1));
    for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = 0.1 * static_cast<double>(i) + r;
    GradSyncOptions options = small_buckets();
    if (in_place) options.in_place_bytes = 1;
    GradientSynchronizer sync(comm, options);
    sync.add("half", {half.data(), half.size(), DataType::Float16, Device::CPU});
    sync.add("bf16", {bf.data(), bf.size(), DataType::BFloat16, Device::CPU});
    sync.add("wide", tensor_view(std::span(wide)));
    for (std::size_t g = 0; g < 3; ++g) sync.mark_ready(g);
    sync.finish();
    for (std::size_t i = 0; i < half.size(); ++i) {
      float expected = static_cast<float>(2 * (i % 7) + 1) * 0.5f;
      require(collectives::half_to_float(half[i]) == expected, "half[{}] = {}", i,
              collectives::half_to_float(half[i]));
    }
    require(collectives::bfloat16_to_float(bf[0]) == 2.0f, "bf16 = {}",
            collectives::bfloat16_to_float(bf[0]));
    for (std::size_t i = 0; i < wide.size(); ++i) {
      double expected = ((0.1 * static_cast<double>(i) + 0) + (0.1 * static_cast<double>(i) + 1)) * 0.5;
      require(wide[i] == expected, "wide[{}] = {} expected {}", i, wide[i], expected);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(BucketsOrInPlace, HalfPrecisionAndFloat64, ::testing::Bool());

TEST(GradientSynchronizer, NoSyncMicroStepsAccumulateThenOneAllReduce) {
  run_group(2, [](Communicator& comm) {
    const int r = comm.rank();
    std::vector<double> grad(5000, 0.0);
    GradientSynchronizer sync(comm, small_buckets());
    sync.add("w", tensor_view(std::span(grad)));
    const int micro_steps = 3;
    for (int m = 0; m < micro_steps; ++m) {
      sync.set_sync(m == micro_steps - 1);
      for (std::size_t i = 0; i < grad.size(); ++i) grad[i] += static_cast<double>(r + m + 1);  // "backward"
      sync.mark_ready(0);
      sync.finish();
      if (m < micro_steps - 1)
        require(grad[0] == static_cast<double>((m + 1) * (r + 1) + m * (m + 1) / 2),
                "micro-step {}: the gradient changed without sync: {}", m, grad[0]);
    }
    // Rank r accumulated 3r + 6; the average over ranks 0 and 1 is (6 + 9) / 2.
    for (double g : grad) require(g == 7.5, "accumulated average {} != 7.5", g);
    GradSyncStats stats = sync.stats();
    require(stats.skipped_steps == 2 && stats.synced_steps == 1 && stats.bucket_all_reduces == 1,
            "skipped {} synced {} all-reduces {}", stats.skipped_steps, stats.synced_steps,
            stats.bucket_all_reduces);
  });
}

TEST(GradientSynchronizer, BroadcastParametersCopiesRankZeros) {
  run_group(3, [](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> w(777, static_cast<float>(r + 1)), gw(777);
    std::vector<double> b(5, -r), gb(5);
    GradientSynchronizer sync(comm);
    sync.add("w", tensor_view(std::span(gw)), tensor_view(std::span(w)));
    sync.add("b", tensor_view(std::span(gb)), tensor_view(std::span(b)));
    sync.broadcast_parameters();
    for (float v : w) require(v == 1.0f, "rank {}: w = {}", r, v);
    for (double v : b) require(v == 0.0, "rank {}: b = {}", r, v);
  });
}

TEST(GradientSynchronizer, BroadcastParametersNamesTheFirstDifferenceOnEveryRank) {
  run_group(3, [](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> w(16), gw(16), b(r == 2 ? 5 : 4), gb(b.size());
    GradientSynchronizer sync(comm);
    sync.add("w", tensor_view(std::span(gw)), tensor_view(std::span(w)));
    sync.add("b", tensor_view(std::span(gb)), tensor_view(std::span(b)));
    try {
      sync.broadcast_parameters();
    } catch (const Error& e) {
      std::string what = e.what();
      require(e.code() == ErrorCode::Mismatch, "code {}", to_string(e.code()));
      require(what.find("rank 2 registered a different model") != std::string::npos &&
                  what.find("gradient 1") != std::string::npos &&
                  what.find("rank 0 has 4 x float32") != std::string::npos &&
                  what.find("rank 2 has 5 x float32") != std::string::npos,
              "unhelpful message: {}", what);
      return;
    }
    throw std::runtime_error("broadcast_parameters accepted different models");
  });
}

TEST(GradientSynchronizer, MisuseIsReportedNotHung) {
  run_group(2, [](Communicator& comm) {
    std::vector<float> a(10), b(10);
    GradientSynchronizer sync(comm);
    sync.add("a", tensor_view(std::span(a)));
    sync.add("b", tensor_view(std::span(b)));
    sync.mark_ready(1);
    bool twice = false;
    try {
      sync.mark_ready(1);
    } catch (const Error& e) {
      twice = std::string(e.what()).find("already marked ready") != std::string::npos;
    }
    require(twice, "marking a gradient twice was not reported");
    bool missing = false;
    try {
      sync.finish();
    } catch (const Error& e) {
      missing = std::string(e.what()).find("0 ('a')") != std::string::npos;
    }
    require(missing, "finish() with an unmarked gradient was not reported");
    bool closed = false;
    try {
      std::vector<float> c(3);
      sync.add("c", tensor_view(std::span(c)));
    } catch (const Error& e) {
      closed = e.code() == ErrorCode::InvalidArgument;
    }
    require(closed, "add() after the buckets were formed was accepted");
    // The synchronizer is usable again after the errors.
    std::fill(a.begin(), a.end(), 2.0f * static_cast<float>(comm.rank()));
    sync.mark_ready(0);
    sync.mark_ready(1);
    sync.finish();
    require(a[0] == 1.0f, "after recovery a = {}", a[0]);
  });
}

TEST(GradientSynchronizer, RebuildsBucketsFromRankZerosArrivalOrder) {
  run_group(2, [](Communicator& comm) {
    std::vector<std::vector<float>> grads(4, std::vector<float>(1024));  // 4 KiB each
    GradSyncOptions options;
    options.first_bucket_bytes = 8192;
    options.bucket_bytes = 8192;
    options.rebuild_buckets = true;
    GradientSynchronizer sync(comm, options);
    for (std::size_t g = 0; g < grads.size(); ++g)
      sync.add("g" + std::to_string(g), tensor_view(std::span(grads[g])));
    auto before = sync.buckets();
    require(before == std::vector<std::vector<std::size_t>>{{3, 2}, {1, 0}}, "initial buckets differ");
    // Backward actually produces 0 and 3 first on rank 0 (rank 1's order must not matter).
    std::vector<std::size_t> order =
        comm.rank() == 0 ? std::vector<std::size_t>{0, 3, 1, 2} : std::vector<std::size_t>{2, 1, 3, 0};
    for (int step = 0; step < 2; ++step) {
      for (auto& g : grads) std::fill(g.begin(), g.end(), static_cast<float>(comm.rank() * 2 + step));
      for (std::size_t g : order) sync.mark_ready(g);
      sync.finish();
      for (auto& g : grads) require(g[0] == static_cast<float>(1 + step), "step {}: {}", step, g[0]);
    }
    auto after = sync.buckets();
    require(after == std::vector<std::vector<std::size_t>>{{0, 3}, {1, 2}}, "rebuilt buckets: first {}",
            after.empty() ? 99 : after[0][0]);
  });
}

}  // namespace
}  // namespace canopy
