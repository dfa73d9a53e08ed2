#include "bench/collectives/measurement.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "bench/collectives/bookkeeping.hpp"
#include "bench/collectives/timing.hpp"
#include "bench/collectives/windows.hpp"
#include "oracle/exact_values.hpp"
#include "oracle/rank_result.hpp"

namespace canopy::bench {
namespace {

// Sizes count the bytes of the biggest buffer, as nccl-tests does: P blocks of `block` elements.
bool is_blocked(Collective c) {
  return c == Collective::AllGather || c == Collective::ReduceScatter || c == Collective::AllToAll ||
         c == Collective::Gather || c == Collective::Scatter;
}

void grow(std::vector<std::byte>& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
}

}  // namespace

double bus_factor(Collective collective, int ranks) {
  double p = ranks;
  switch (collective) {
    case Collective::AllReduce:
      return 2 * (p - 1) / p;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter:
      return (p - 1) / p;
    case Collective::Broadcast:
    case Collective::Reduce:
      return 1;
    default:
      return 0;
  }
}

// Elements of the input and the output of a call on `block` elements per rank.
std::pair<std::uint64_t, std::uint64_t> Measurement::buffer_elements(Collective c,
                                                                     std::uint64_t block) const {
  const auto ranks = static_cast<std::uint64_t>(comm_.size());
  switch (c) {
    case Collective::ReduceScatter:
    case Collective::Scatter:
      return {block * ranks, block};
    case Collective::AllGather:
    case Collective::Gather:
      return {block, block * ranks};
    case Collective::AllToAll:
      return {block * ranks, block * ranks};
    default:
      return {block, block};
  }
}

// Buffers: all-gather and gather gather `block` elements per rank into output; reduce-scatter and
// scatter split an input of ranks x block into `block`; all-to-all sends ranks x block and receives as
// much; the others work on one buffer of `block` elements. In place, the smaller buffer is the
// caller's block of the larger one (at the root, for gather and scatter).
CollectiveArgs Measurement::arguments(const BenchCase& c, std::uint64_t block) {
  std::size_t element = size_of(c.dtype);
  const auto [in_elements, out_elements] = buffer_elements(c.collective, block);
  grow(input_, in_elements * element);
  grow(output_, out_elements * element);
  CollectiveArgs args{c.collective, input_.data(), output_.data(), block, c.dtype, c.op, c.root};
  const bool rooted_movement = c.collective == Collective::Gather || c.collective == Collective::Scatter;
  if (c.in_place && (!rooted_movement || comm_.rank() == c.root)) {  // a gather's in place is the root's
    const int owner = rooted_movement ? c.root : comm_.rank();
    if (c.collective == Collective::AllGather || c.collective == Collective::Gather)
      args.input = output_.data() + owner * block * element;
    else if (c.collective == Collective::ReduceScatter || c.collective == Collective::Scatter)
      args.output = input_.data() + owner * block * element;
    else
      args.input = args.output;
  }
  return args;
}

// Block j of an all-to-all's or a scatter's input holds elements j * block.. of the sender's inputs, so
// that rank j can tell them from the blocks for the others.
void Measurement::fill(const BenchCase& c, std::uint64_t block) {
  CollectiveArgs args = arguments(c, block);
  const std::uint64_t in_elements = buffer_elements(c.collective, block).first;
  oracle::fill_inputs(c.dtype, c.op, comm_.rank(), 0, const_cast<void*>(args.input), in_elements);
}

// In place, all-reduce, broadcast and reduce work in output_ (arguments() points the input there too); an
// in-place reduce-scatter leaves its block in the input, as an in-place scatter's root keeps its own.
std::uint64_t Measurement::count_wrong(const BenchCase& c, std::uint64_t block) const {
  const int rank = comm_.rank();
  const std::byte* own_block = input_.data() + rank * block * size_of(c.dtype);
  const bool result_in_input = c.in_place && (c.collective == Collective::ReduceScatter ||
                                              (c.collective == Collective::Scatter && rank == c.root));
  return oracle::count_wrong({c.collective, c.dtype, c.op, rank, comm_.size(), c.root, block},
                             result_in_input ? own_block : output_.data());
}

BenchResult Measurement::run(const BenchCase& c) {
  std::size_t element = size_of(c.dtype);
  std::uint64_t ranks = static_cast<std::uint64_t>(comm_.size());
  std::uint64_t elements = c.bytes / element;
  std::uint64_t block = is_blocked(c.collective) ? elements / ranks : elements;
  if (c.collective == Collective::Barrier) block = 0;

  BenchResult result;
  result.with = c;
  result.count = is_blocked(c.collective) ? block * ranks : block;
  result.bytes = result.count * element;

  CollectiveOptions options;
  options.algorithm = c.algorithm;
  options.chunk_bytes = c.chunk_bytes;
  CollectiveArgs args = arguments(c, block);
  const char* first_or_check = first_call_done_ ? "checks" : "first call";
  first_call_done_ = true;

  double check_seconds = 0;
  if (c.check) {
    fill(c, block);
    const auto begin = std::chrono::steady_clock::now();
    comm_.run(args, options);
    check_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    result.wrong = count_wrong(c, block);
  }
  fill(c, block);
  phases_.mark(first_or_check);
  // Every rank sizes the window by the slowest rank's warm-up, so all run the same count; that all-reduce,
  // or the same of nothing where no window is asked for, lines the ranks up for the timed calls.
  bool lined_up = false;
  auto slowest = [&](double mine) {
    std::vector<double> per_call{mine};
    comm_.all_reduce(std::span<double>(per_call), ReduceOp::Max, {.algorithm = std::string(kLineUp.algorithm)});
    lined_up = true;
    return per_call[0];
  };
  // With -w 0 the checked call's pace sizes the window: no call more than asked for, which at hundreds of
  // ranks on a few cores costs seconds each.
  if (c.warmup == 0 && c.check && c.min_seconds > 0)
    result.iterations = timed_iterations(c.iterations, c.min_seconds, slowest(check_seconds));
  else
    result.iterations = warm_up(
        c.warmup, c.iterations, c.min_seconds, [&] { comm_.run(args, options); }, slowest);
  phases_.mark("calibration");
  if (!lined_up) {
    slowest(0);
    phases_.mark("bookkeeping");
  }
  // The windows follow each other in one stream (or one call at a time, with --latency).
  result.windows = windows_for(result.iterations, c.windows);
  std::vector<int> calls;
  std::vector<double> mine{static_cast<double>(result.wrong), formed_since_launch_};
  for (int w = 0; w < result.windows; ++w) {
    calls.push_back(calls_in_window(result.iterations, result.windows, w));
    const double timed = time_calls(
        calls.back(), c.latency, [&] { comm_.run(args, options); }, [&] { comm_.barrier(); });
    mine.push_back(timed / std::max(1, calls.back()));
  }
  phases_.mark("timed calls");
  // Auto chooses per call, as in a program: for one call's latency, or for a stream's pace once the
  // broadcasts come back to back (from the third in a row). What the timed calls settled on is what the
  // next would run; asked before the bookkeeping below breaks the stream. Only rank 0 prints it: at
  // hundreds of ranks the model's prediction is a good part of each rank's start-up.
  if (comm_.rank() == 0) {
    const auto choice = comm_.choose_algorithm(args, options);
    result.algorithm = choice.name;
    result.predicted_time_us = choice.predicted_seconds * 1e6;
  }

  // Every rank's wrong count, when its group formed and its window times, to rank 0 in one call: only rank 0
  // prints. The others know their own wrong count alone.
  std::vector<double> all(comm_.rank() == 0 ? mine.size() * ranks : 0);
  comm_.gather(std::span<const double>(mine), std::span<double>(all), 0,
               {.algorithm = std::string(kResultsToRankZero.algorithm)});
  phases_.mark("bookkeeping");
  if (comm_.rank() != 0) return result;

  std::vector<std::vector<double>> seconds;
  result.wrong = 0;
  for (std::uint64_t r = 0; r < ranks; ++r) {
    const auto from = all.begin() + static_cast<std::ptrdiff_t>(r * mine.size());
    result.wrong += static_cast<std::uint64_t>(*from);
    last_formed_since_launch_ = std::max(last_formed_since_launch_, *(from + 1));
    seconds.emplace_back(from + 2, from + static_cast<std::ptrdiff_t>(mine.size()));
  }
  const WindowSummary summary = summarize_windows(seconds, calls);
  result.time_us = summary.time * 1e6;
  result.min_time_us = summary.fastest_rank * 1e6;
  result.max_time_us = summary.slowest_rank * 1e6;
  result.fastest_window_us = summary.fastest_window * 1e6;
  result.slowest_window_us = summary.slowest_window * 1e6;
  result.spread = summary.spread();
  result.spread_is_large = summary.spread_is_large();
  if (result.time_us > 0) {
    result.algbw_gbps = result.bytes / (result.time_us * 1e-6) / 1e9;
    result.busbw_gbps = result.algbw_gbps * bus_factor(c.collective, comm_.size());
  }
  return result;
}

}  // namespace canopy::bench
