// Micro-benchmarks of schedule generation: every algorithm of collectives/schedules/ for P = 2, 8, 64
// ranks and three buffer sizes, and the schedule cache that spares a training loop most of it.
// items_per_second is schedules per second; `steps` is the average length of one rank's schedule.
// Each iteration builds the schedule of the next rank in turn, so a number covers every rank of the
// group (the root of a broadcast has more to do than a leaf).
//
//   canopy-micro-bench --benchmark_filter='^schedule' --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/micro/micro_benchmarks.hpp"
#include "collectives/executor.hpp"
#include "collectives/selection/schedule_cache.hpp"
#include "collectives/schedules/algorithms.hpp"

namespace canopy::micro {

using namespace canopy::collectives;

namespace {

constexpr Collective kCollectives[] = {Collective::Broadcast,     Collective::Reduce,
                                       Collective::AllReduce,     Collective::AllGather,
                                       Collective::ReduceScatter, Collective::Barrier};
constexpr std::int64_t kRankCounts[] = {2, 8, 64};
// float32 elements: 4 KiB (latency-bound, one chunk), 4 MiB (4 chunks), 64 MiB (64 chunks).
constexpr std::int64_t kCounts[] = {1 << 10, 1 << 20, 1 << 24};
// The communicator's default chunk: 1 MiB of float32.
constexpr std::uint64_t kChunkCount = (1 << 20) / 4;

// `count` is the elements of the whole buffer, for every collective: an all-gather's or reduce-scatter's
// per-rank block is count / P, so that one count means the same data volume everywhere.
CollectiveCall call_of(Collective collective, int rank, int size, std::uint64_t count) {
  const bool blocked = collective == Collective::AllGather || collective == Collective::ReduceScatter;
  if (blocked) count = std::max<std::uint64_t>(1, count / static_cast<std::uint64_t>(size));
  return {.collective = collective,
          .rank = rank,
          .size = size,
          .count = count,
          .root = 0,
          .chunk_count = kChunkCount};
}

// range(0) = P, range(1) = elements of the whole buffer.
void build_bench(benchmark::State& state, const Algorithm* algorithm) {
  const auto size = static_cast<int>(state.range(0));
  const auto count = static_cast<std::uint64_t>(state.range(1));
  int rank = 0;
  std::int64_t steps = 0;
  for (auto _ : state) {
    Schedule schedule = algorithm->build(call_of(algorithm->collective, rank, size, count));
    steps += static_cast<std::int64_t>(schedule.steps.size());
    benchmark::DoNotOptimize(schedule);
    rank = (rank + 1) % size;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["steps"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kAvgIterations);
}

// A cache miss as the communicator pays it: build, compile (dependents, per-peer order), evict.
// `distinct` calls cycle through a cache one entry smaller, so that every lookup misses (LRU).
void cache_miss_bench(benchmark::State& state, const Algorithm* algorithm) {
  const auto size = static_cast<int>(state.range(0));
  const auto count = static_cast<std::uint64_t>(state.range(1));
  constexpr int kDistinct = 8;
  ScheduleCache cache(kDistinct - 1);
  int turn = 0;
  for (auto _ : state) {
    // The same rank each time with another count: a new key, a schedule as large as the others.
    const auto call = call_of(algorithm->collective, 1, size, count + static_cast<std::uint64_t>(turn));
    benchmark::DoNotOptimize(&cache.get(*algorithm, call));
    turn = (turn + 1) % kDistinct;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// The steady state of a training loop: the same few calls again and again, every lookup a hit.
void cache_hit_bench(benchmark::State& state, const Algorithm* algorithm) {
  const auto size = static_cast<int>(state.range(0));
  const auto count = static_cast<std::uint64_t>(state.range(1));
  constexpr int kDistinct = 16;  // calls a training step makes (one per bucket), all cached
  ScheduleCache cache(64);
  std::vector<CollectiveCall> calls;
  for (int i = 0; i < kDistinct; ++i)
    calls.push_back(call_of(algorithm->collective, 1, size, count + static_cast<std::uint64_t>(i)));
  for (const auto& call : calls) cache.get(*algorithm, call);
  int turn = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(&cache.get(*algorithm, calls[static_cast<std::size_t>(turn)]));
    turn = (turn + 1) % kDistinct;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

std::string name_of(const char* family, const Algorithm& algorithm) {
  return std::string(family) + "/" + std::string(to_string(algorithm.collective)) + "/" +
         std::string(algorithm.name);
}

}  // namespace

void register_schedule_benchmarks() {
  for (Collective collective : kCollectives) {
    for (const Algorithm& algorithm : algorithms(collective)) {
      auto* b = benchmark::RegisterBenchmark(name_of("schedule", algorithm).c_str(), build_bench, &algorithm);
      b->ArgNames({"P", "count"});
      for (std::int64_t size : kRankCounts) {
        // A barrier moves no data: one count is enough.
        if (collective == Collective::Barrier) {
          b->Args({size, 0});
          continue;
        }
        for (std::int64_t count : kCounts) b->Args({size, count});
      }
    }
  }
  // The cache, for the algorithm that auto picks for large all-reduces and for a short schedule.
  using Bench = void (*)(benchmark::State&, const Algorithm*);
  const std::pair<const char*, Bench> cache_benches[] = {{"schedule_cache_miss", cache_miss_bench},
                                                         {"schedule_cache_hit", cache_hit_bench}};
  for (const char* name : {"ring", "recursive-doubling"}) {
    const Algorithm* algorithm = find_algorithm(Collective::AllReduce, name);
    for (const auto& [family, bench] : cache_benches) {
      benchmark::RegisterBenchmark(name_of(family, *algorithm).c_str(), bench, algorithm)
          ->ArgNames({"P", "count"})
          ->Args({8, 1 << 20})
          ->Args({64, 1 << 20});
    }
  }
}

}  // namespace canopy::micro
