// Micro-benchmarks of the reduction kernels, per dtype and op, next to memcpy of the same buffer and a
// naive per-element-switch loop, so that one run shows how close reduce_into gets to memory bandwidth.
//
// Bytes per second count what the memory system moves, as for memcpy: dst op= src reads dst and src and
// writes dst (3 x buffer bytes); memcpy reads one buffer and writes another (2 x); a float16 -> float
// conversion reads 2 and writes 4 bytes per element. Avg is not measured apart: it reduces as Sum.
//
//   canopy-micro-bench --benchmark_filter='reduce_into|memcpy' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "canopy/types.hpp"
#include "collectives/kernels/half_convert.hpp"
#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::micro {

using namespace canopy::collectives;

namespace {

// 4 KiB (L1) .. 64 MiB (memory), per buffer.
constexpr std::int64_t kMinBytes = 4 << 10;
constexpr std::int64_t kMaxBytes = 64 << 20;

// A buffer of `bytes` holding small values (-6..6) of `type`. Products overflow to infinity after a few
// iterations; that does not matter: the kernels take the same time for any value (no denormals arise).
std::vector<std::uint64_t> make_buffer(DataType type, std::size_t bytes, int seed) {
  std::vector<std::uint64_t> buffer((bytes + 7) / 8);
  const std::size_t count = bytes / size_of(type);
  auto* raw = reinterpret_cast<std::byte*>(buffer.data());
  auto store = [raw](std::size_t i, auto value) {
    std::memcpy(raw + i * sizeof value, &value, sizeof value);
  };
  for (std::size_t i = 0; i < count; ++i) {
    const int small = static_cast<int>((i * 7 + static_cast<std::size_t>(seed)) % 13) - 6;
    const auto value = static_cast<float>(small);
    switch (type) {
      case DataType::Float32:
        store(i, value);
        break;
      case DataType::Float64:
        store(i, static_cast<double>(value));
        break;
      case DataType::Float16:
        store(i, float_to_half(value));
        break;
      case DataType::BFloat16:
        store(i, float_to_bfloat16(value));
        break;
      case DataType::Int8:
        store(i, static_cast<std::int8_t>(small));
        break;
      case DataType::UInt8:
        store(i, static_cast<std::uint8_t>(small + 6));
        break;
      case DataType::Int32:
        store(i, static_cast<std::int32_t>(small));
        break;
      case DataType::Int64:
        store(i, static_cast<std::int64_t>(small));
        break;
    }
  }
  return buffer;
}

// What a first implementation looks like: one switch per element over type and op.
__attribute__((noinline)) void naive_reduce(DataType type, ReduceOp op, void* dst, const void* src,
                                            std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    switch (type) {
      case DataType::Float32: {
        float& d = static_cast<float*>(dst)[i];
        const float s = static_cast<const float*>(src)[i];
        d = op == ReduceOp::Prod ? d * s : op == ReduceOp::Min ? std::min(d, s) : d + s;
        break;
      }
      case DataType::Float16: {
        std::uint16_t& d = static_cast<std::uint16_t*>(dst)[i];
        const float s = half_to_float(static_cast<const std::uint16_t*>(src)[i]);
        const float a = half_to_float(d);
        d = float_to_half(op == ReduceOp::Prod ? a * s : op == ReduceOp::Min ? std::min(a, s) : a + s);
        break;
      }
      case DataType::BFloat16: {
        std::uint16_t& d = static_cast<std::uint16_t*>(dst)[i];
        const float s = bfloat16_to_float(static_cast<const std::uint16_t*>(src)[i]);
        const float a = bfloat16_to_float(d);
        d = float_to_bfloat16(op == ReduceOp::Prod ? a * s : op == ReduceOp::Min ? std::min(a, s) : a + s);
        break;
      }
      case DataType::Int32: {
        std::int32_t& d = static_cast<std::int32_t*>(dst)[i];
        const std::int32_t s = static_cast<const std::int32_t*>(src)[i];
        d = static_cast<std::int32_t>(static_cast<std::uint32_t>(d) + static_cast<std::uint32_t>(s));
        break;
      }
      default:
        break;
    }
  }
}

void reduce_into_bench(benchmark::State& state, DataType type, ReduceOp op) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  auto dst = make_buffer(type, bytes, 1);
  const auto src = make_buffer(type, bytes, 2);
  for (auto _ : state) {
    reduce_into(type, op, dst.data(), src.data(), bytes / size_of(type));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * bytes));
}

void naive_bench(benchmark::State& state, DataType type) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  auto dst = make_buffer(type, bytes, 1);
  const auto src = make_buffer(type, bytes, 2);
  for (auto _ : state) {
    naive_reduce(type, ReduceOp::Sum, dst.data(), src.data(), bytes / size_of(type));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * bytes));
}

void memcpy_bench(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  auto dst = make_buffer(DataType::UInt8, bytes, 1);
  const auto src = make_buffer(DataType::UInt8, bytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * bytes));
}

// Bulk float16 -> float, per implementation; the range is the size of the float16 input.
void widen_bench(benchmark::State& state, void (*widen)(const std::uint16_t*, float*, std::size_t)) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto src = make_buffer(DataType::Float16, bytes, 2);
  std::vector<float> dst(bytes / 2);
  for (auto _ : state) {
    widen(reinterpret_cast<const std::uint16_t*>(src.data()), dst.data(), dst.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * bytes));
}

}  // namespace

void register_reduce_benchmarks() {
  auto sizes = [](benchmark::internal::Benchmark* b) { b->RangeMultiplier(8)->Range(kMinBytes, kMaxBytes); };
  for (DataType type : kAllDataTypes) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
      const std::string name =
          "reduce_into/" + std::string(to_string(type)) + "_" + std::string(to_string(op));
      sizes(benchmark::RegisterBenchmark(name.c_str(), reduce_into_bench, type, op));
    }
  }
  for (DataType type : {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Int32}) {
    const std::string name = "naive_switch/" + std::string(to_string(type)) + "_sum";
    sizes(benchmark::RegisterBenchmark(name.c_str(), naive_bench, type));
  }
  sizes(benchmark::RegisterBenchmark("memcpy", memcpy_bench));
  sizes(benchmark::RegisterBenchmark("float16_to_float/portable", widen_bench,
                                     detail::convert_float16_to_float_portable));
  if (detail::cpu_has_f16c()) {
    sizes(benchmark::RegisterBenchmark("float16_to_float/f16c", widen_bench,
                                       detail::convert_float16_to_float_f16c));
  }
}

}  // namespace canopy::micro
