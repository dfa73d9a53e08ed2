// Micro-benchmarks of the frame header in front of every message (transport/frame.hpp): encoding one,
// decoding a valid one, and refusing a corrupt one. Bytes per second count header bytes (56 each);
// the time per iteration is the cost per header.
//
//   canopy-micro-bench --benchmark_filter='^frame/' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>

#include "bench/micro/micro_benchmarks.hpp"
#include "common/error.hpp"
#include "transport/frame.hpp"

namespace canopy::micro {
namespace {

using transport::FrameBytes;
using transport::FrameHeader;
using transport::kFrameHeaderSize;

// A header as an all-reduce step sends it: every field nonzero, so no encoding shortcut applies.
FrameHeader typical_header() {
  FrameHeader header;
  header.envelope = {.comm_id = 0x1234'5678'9abc'def0,
                     .seq = 4711,
                     .collective = Collective::AllReduce,
                     .dtype = DataType::Float32,
                     .op = ReduceOp::Sum,
                     .algorithm = 5,
                     .root = 0,
                     .count = 1 << 24,
                     .step = 17};
  header.payload_bytes = 1 << 20;
  return header;
}

void count_headers(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kFrameHeaderSize));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void encode_bench(benchmark::State& state) {
  FrameHeader header = typical_header();
  for (auto _ : state) {
    benchmark::DoNotOptimize(header);  // as if each header were new: no hoisting out of the loop
    FrameBytes bytes = transport::encode_frame(header);
    benchmark::DoNotOptimize(bytes);
  }
  count_headers(state);
}

void decode_bench(benchmark::State& state) {
  FrameBytes bytes = transport::encode_frame(typical_header());
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes);
    FrameHeader header = transport::decode_frame(bytes);
    benchmark::DoNotOptimize(header);
  }
  count_headers(state);
}

// Decoding and then comparing with the receive that was posted: what a receiver does per message.
void decode_and_check_bench(benchmark::State& state) {
  const FrameHeader expected = typical_header();
  FrameBytes bytes = transport::encode_frame(expected);
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes);
    FrameHeader header = transport::decode_frame(bytes);
    transport::check_frame(header, expected.envelope, expected.payload_bytes, 0, 1);
    benchmark::DoNotOptimize(header);
  }
  count_headers(state);
}

// A corrupt header costs an exception with a formatted message: rare (the peer is not Canopy, or the
// stream lost its framing), and then the connection is lost anyway; measured so that the cost is known.
void reject_bench(benchmark::State& state, std::size_t corrupt_offset) {
  FrameBytes bytes = transport::encode_frame(typical_header());
  bytes[corrupt_offset] ^= std::byte{0x5a};
  std::int64_t rejected = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes);
    try {
      benchmark::DoNotOptimize(transport::decode_frame(bytes));
    } catch (const Error&) {
      ++rejected;
    }
  }
  if (rejected != static_cast<std::int64_t>(state.iterations()))
    state.SkipWithError("a corrupt header was accepted");
  count_headers(state);
}

}  // namespace

void register_frame_benchmarks() {
  benchmark::RegisterBenchmark("frame/encode", encode_bench);
  benchmark::RegisterBenchmark("frame/decode_valid", decode_bench);
  benchmark::RegisterBenchmark("frame/decode_and_check", decode_and_check_bench);
  benchmark::RegisterBenchmark("frame/reject_bad_magic", reject_bench, std::size_t{0});
  benchmark::RegisterBenchmark("frame/reject_bad_reserved", reject_bench, std::size_t{20});
}

}  // namespace canopy::micro
