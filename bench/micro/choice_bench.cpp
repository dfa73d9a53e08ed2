// Micro-benchmarks of the cost model's choice: what a communicator's first call of a kind pays before it
// sends anything (every candidate's schedule timed by the simulator), for P ranks on one host of 2 cores,
// as on this machine, and on clusters of 8-rank hosts. A later call of the same kind finds the choice
// cached and pays nothing.
//
//   canopy-micro-bench --benchmark_filter='^choice' --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "bench/micro/micro_benchmarks.hpp"
#include "collectives/selection/cost_model.hpp"

namespace canopy::micro {

using namespace canopy::collectives;

namespace {

// P ranks: all on one host of 2 cores (ranks_per_host 0), or on hosts of ranks_per_host ranks and as many
// cores (a cluster).
std::shared_ptr<const HostLayout> layout_of(int size, int ranks_per_host) {
  auto hosts = std::make_shared<HostLayout>();
  if (ranks_per_host == 0) {
    hosts->host_of_rank.assign(static_cast<std::size_t>(size), 0);
    hosts->cores_of_host = {2};
    return hosts;
  }
  for (int r = 0; r < size; ++r) hosts->host_of_rank.push_back(r / ranks_per_host);
  hosts->cores_of_host.assign(static_cast<std::size_t>((size + ranks_per_host - 1) / ranks_per_host),
                              ranks_per_host);
  return hosts;
}

// range(0) = P, range(1) = float32 elements, range(2) = ranks per host (0: one host of 2 cores).
void choice_bench(benchmark::State& state, Collective collective, Pace pace) {
  const auto size = static_cast<int>(state.range(0));
  const auto hosts = layout_of(size, static_cast<int>(state.range(2)));
  const CollectiveCall call{.collective = collective,
                            .size = size,
                            .count = static_cast<std::uint64_t>(state.range(1)),
                            .chunk_count = (1 << 20) / 4,
                            .hosts = hosts};
  // Loopback within a host; between hosts a 10 Gbit/s network with 30 us a message.
  LinkModel link(10e-6, 1.0 / 2e9, 1.0 / 10e9);
  link.between_hosts = LinkCost{30e-6, 1.0 / 1.25e9, 1.0 / 1.25e9, 0};
  const CostModel model(link);
  for (auto _ : state) benchmark::DoNotOptimize(model.evaluate(call, 4, pace));
  state.SetLabel(model.evaluate(call, 4, pace).algorithm->name.data());
}

}  // namespace

void register_choice_benchmarks() {
  // A first 4-byte all-reduce's choice on a cluster of 8-rank hosts, up to 16,384 ranks: what
  // bench/startup/startup-model.py extrapolates start-up with.
  benchmark::RegisterBenchmark("choice_cluster/allreduce/one_call", choice_bench, Collective::AllReduce,
                               Pace::OneCall)
      ->ArgNames({"P", "count", "per_host"})
      ->Args({512, 1, 8})
      ->Args({2048, 1, 8})
      ->Args({8192, 1, 8})
      ->Args({16384, 1, 8})
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  const std::pair<const char*, Collective> collectives[] = {{"allreduce", Collective::AllReduce},
                                                            {"broadcast", Collective::Broadcast}};
  for (const auto& [name, collective] : collectives) {
    for (const auto& [pace_name, pace] : {std::pair{"one_call", Pace::OneCall}, {"stream", Pace::Stream}}) {
      benchmark::RegisterBenchmark((std::string("choice/") + name + "/" + pace_name).c_str(), choice_bench,
                                   collective, pace)
          ->ArgNames({"P", "count", "per_host"})
          ->Args({64, 1, 0})
          ->Args({512, 1, 0})
          ->Args({512, 1 << 20, 0})
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace canopy::micro
