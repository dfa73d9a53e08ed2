// canopy-micro-bench: Google Benchmark of Canopy's hot pieces that need no network. A quick full run:
//
//   canopy-micro-bench --benchmark_min_time=0.05
//
// and one family: --benchmark_filter='^frame/' (or reduce_into/, schedule/, schedule_cache/, choice/, memcpy).
#include <benchmark/benchmark.h>

#include "bench/micro/micro_benchmarks.hpp"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  canopy::micro::register_reduce_benchmarks();
  canopy::micro::register_frame_benchmarks();
  canopy::micro::register_schedule_benchmarks();
  canopy::micro::register_choice_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
