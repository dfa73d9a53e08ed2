// Micro-benchmarks of the cost model's choice: what a communicator's first call of a kind pays before it
// sends anything (every candidate's schedule timed by the simulator), for P ranks on one host of 2 cores,
// as on this machine. A later call of the same kind finds the choice cached and pays nothing.
//
//   canopy-micro-bench --benchmark_filter='^choice' --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "bench/micro/micro_benchmarks.hpp"
#include "collectives/cost_model.hpp"

namespace canopy::micro {

using namespace canopy::collectives;

namespace {

// range(0) = P, range(1) = float32 elements; Stream pace when `stream`.
void choice_bench(benchmark::State& state, Collective collective, Pace pace) {
  const auto size = static_cast<int>(state.range(0));
  auto hosts = std::make_shared<HostLayout>();
  hosts->host_of_rank.assign(static_cast<std::size_t>(size), 0);
  hosts->cores_of_host = {2};
  const CollectiveCall call{.collective = collective,
                            .size = size,
                            .count = static_cast<std::uint64_t>(state.range(1)),
                            .chunk_count = (1 << 20) / 4,
                            .hosts = hosts};
  const CostModel model(LinkModel(10e-6, 1.0 / 2e9, 1.0 / 10e9));
  for (auto _ : state) benchmark::DoNotOptimize(model.evaluate(call, 4, pace));
  state.SetLabel(model.evaluate(call, 4, pace).algorithm->name.data());
}

}  // namespace

void register_choice_benchmarks() {
  const std::pair<const char*, Collective> collectives[] = {{"allreduce", Collective::AllReduce},
                                                            {"broadcast", Collective::Broadcast}};
  for (const auto& [name, collective] : collectives) {
    for (const auto& [pace_name, pace] : {std::pair{"one_call", Pace::OneCall}, {"stream", Pace::Stream}}) {
      benchmark::RegisterBenchmark((std::string("choice/") + name + "/" + pace_name).c_str(), choice_bench,
                                   collective, pace)
          ->ArgNames({"P", "count"})
          ->Args({64, 1})
          ->Args({512, 1})
          ->Args({512, 1 << 20})
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace canopy::micro
