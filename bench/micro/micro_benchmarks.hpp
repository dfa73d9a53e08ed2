// The families of canopy-micro-bench, each registered by its own file; main.cpp runs them together, so
// one --benchmark_filter picks among all of them (reduce_into/, frame/, schedule/, schedule_cache/, choice/).
#pragma once

namespace canopy::micro {

void register_reduce_benchmarks();    // reduce_bench.cpp: reduction kernels per dtype and op, memcpy
void register_frame_benchmarks();     // frame_bench.cpp: frame header encode, decode, rejection
void register_schedule_benchmarks();  // schedule_bench.cpp: schedule generation and the schedule cache
void register_choice_benchmarks();    // choice_bench.cpp: the cost model's choice at a first call

}  // namespace canopy::micro
