// canopy-mpi-bench: the peer in bench/compare. Times MPI_Allreduce / MPI_Bcast / MPI_Reduce /
// MPI_Allgather / MPI_Reduce_scatter_block / MPI_Alltoall / MPI_Gather / MPI_Scatter exactly as canopy-bench
// times Canopy (same sizes, warm-up, barrier, average over ranks of the per-iteration time, nccl-tests
// busbw), checks the results exactly, and writes rows with canopy-bench's JSON keys so `canopy-bench compare`
// can divide one by the other.
//
//   mpirun --mca pml ob1 --mca btl tcp,self -np 4 canopy-mpi-bench allreduce -b 4 -e 64M --json mpi.json
// Only MPI's C interface is used; Open MPI's deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/collectives/measurement.hpp"
#include "bench/collectives/selection.hpp"
#include "bench/collectives/sweep_flags.hpp"
#include "bench/collectives/timing.hpp"

namespace canopy::bench {
namespace {

using Settings = SweepFlags;

// Inputs whose float sum is exact in any order: small integers.
float input_of(int rank, std::uint64_t i) {
  return static_cast<float>(rank + 1 + static_cast<int>(i % 13));
}

struct Buffers {
  std::vector<float> in, out;
};

// One call of `collective` on `count` floats (all-gather / reduce-scatter: per-rank blocks).
void call(Collective collective, Buffers& b, int count, int root) {
  switch (collective) {
    case Collective::AllReduce:
      MPI_Allreduce(b.in.data(), b.out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case Collective::Broadcast:
      MPI_Bcast(b.out.data(), count, MPI_FLOAT, root, MPI_COMM_WORLD);
      break;
    case Collective::Reduce:
      MPI_Reduce(b.in.data(), b.out.data(), count, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
      break;
    case Collective::AllGather:
      MPI_Allgather(b.in.data(), count, MPI_FLOAT, b.out.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case Collective::ReduceScatter:
      MPI_Reduce_scatter_block(b.in.data(), b.out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case Collective::AllToAll:
      MPI_Alltoall(b.in.data(), count, MPI_FLOAT, b.out.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case Collective::Gather:
      MPI_Gather(b.in.data(), count, MPI_FLOAT, b.out.data(), count, MPI_FLOAT, root, MPI_COMM_WORLD);
      break;
    case Collective::Scatter:
      MPI_Scatter(b.in.data(), count, MPI_FLOAT, b.out.data(), count, MPI_FLOAT, root, MPI_COMM_WORLD);
      break;
    default:
      break;
  }
}

// Elements of this rank's result that differ from the exact answer.
std::uint64_t wrong_elements(Collective collective, const Buffers& b, int count, int rank, int ranks,
                             int root) {
  auto sum_at = [&](std::uint64_t i) {
    float s = 0;
    for (int r = 0; r < ranks; ++r) s += input_of(r, i);
    return s;
  };
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(count); ++i) {
    switch (collective) {
      case Collective::AllReduce:
        wrong += b.out[i] != sum_at(i);
        break;
      case Collective::Broadcast:
        wrong += b.out[i] != input_of(root, i);
        break;
      case Collective::Reduce:
        wrong += rank == root && b.out[i] != sum_at(i);
        break;
      case Collective::ReduceScatter:
        wrong += b.out[i] != sum_at(static_cast<std::uint64_t>(rank) * count + i);
        break;
      case Collective::AllGather:
        for (int r = 0; r < ranks; ++r)
          wrong += b.out[static_cast<std::uint64_t>(r) * count + i] != input_of(r, i);
        break;
      case Collective::AllToAll:  // block j of rank r's input is elements j * count.. of its inputs
        for (int r = 0; r < ranks; ++r)
          wrong += b.out[static_cast<std::uint64_t>(r) * count + i] !=
                   input_of(r, static_cast<std::uint64_t>(rank) * count + i);
        break;
      case Collective::Gather:
        for (int r = 0; r < ranks && rank == root; ++r)
          wrong += b.out[static_cast<std::uint64_t>(r) * count + i] != input_of(r, i);
        break;
      case Collective::Scatter:
        wrong += b.out[i] != input_of(root, static_cast<std::uint64_t>(rank) * count + i);
        break;
      default:
        break;
    }
  }
  return wrong;
}

int run(const Settings& s) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  auto collectives = collectives_named(s.collective);
  const auto sizes = s.sizes();
  const double min_time_seconds = s.min_time_seconds();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  Buffers b;
  std::uint64_t total_wrong = 0;
  for (Collective collective : collectives) {
    if (collective == Collective::Barrier) continue;
    const bool blocked = collective == Collective::AllGather || collective == Collective::ReduceScatter ||
                         collective == Collective::AllToAll || collective == Collective::Gather ||
                         collective == Collective::Scatter;
    const bool whole_input = collective == Collective::ReduceScatter || collective == Collective::AllToAll ||
                             collective == Collective::Scatter;
    const bool whole_output = collective == Collective::AllGather || collective == Collective::AllToAll ||
                              collective == Collective::Gather;
    if (rank == 0)
      fmt::print("# {} on {} ranks (MPI)\n{:>12} {:>10} {:>10} {:>10} {:>8} {:>8} {:>7}\n",
                 command_name(collective), ranks, "size(B)", "time(us)", "min(us)", "max(us)", "algbw",
                 "busbw", "#wrong");
    for (std::uint64_t bytes : sizes) {
      // Sizes as canopy-bench rounds them: whole elements, whole blocks for the blocked collectives.
      std::uint64_t elements = bytes / sizeof(float);
      std::uint64_t count = blocked ? elements / ranks : elements;
      std::uint64_t whole = blocked ? count * ranks : count;
      // Allocated once per size and touched before timing, as canopy-bench's buffers are reused.
      b.in.assign(std::max<std::uint64_t>(1, whole_input ? whole : count), 0.0f);
      b.out.assign(std::max<std::uint64_t>(1, whole_output ? whole : count), 0.0f);
      for (std::uint64_t i = 0; i < b.in.size(); ++i) b.in[i] = input_of(rank, i);
      if (collective == Collective::Broadcast && rank == s.root)
        for (std::uint64_t i = 0; i < count; ++i) b.out[i] = input_of(rank, i);
      int n = static_cast<int>(count);
      call(collective, b, n, s.root);
      std::uint64_t wrong = wrong_elements(collective, b, n, rank, ranks, s.root);
      // The same rule as canopy-bench: the slowest rank's warm-up sizes everyone's window.
      auto slowest = [](double mine) {
        double max = 0;
        MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        return max;
      };
      const int iterations = warm_up(
          s.warmup, s.iterations, min_time_seconds, [&] { call(collective, b, n, s.root); }, slowest);
      MPI_Barrier(MPI_COMM_WORLD);
      const double timed = time_calls(
          iterations, s.latency, [&] { call(collective, b, n, s.root); },
          [] { MPI_Barrier(MPI_COMM_WORLD); });
      double seconds = timed / std::max(1, iterations);
      double sum = 0, min = 0, max = 0;
      MPI_Allreduce(&seconds, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(&seconds, &min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&seconds, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      unsigned long long mine = wrong, all = 0;
      MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      total_wrong += all;
      double time_us = sum / ranks * 1e6;
      double result_bytes = static_cast<double>(whole * sizeof(float));
      double algbw = time_us > 0 ? result_bytes / (time_us * 1e-6) / 1e9 : 0;
      double busbw = algbw * bus_factor(collective, ranks);
      if (rank != 0) continue;
      fmt::print("{:>12} {:>10.1f} {:>10.1f} {:>10.1f} {:>8.3f} {:>8.3f} {:>7}\n", whole * sizeof(float),
                 time_us, min * 1e6, max * 1e6, algbw, busbw, all);
      std::fflush(stdout);
      rows.push_back({{"collective", command_name(collective)},
                      {"algo", "mpi"},
                      {"bytes", whole * sizeof(float)},
                      {"count", whole},
                      {"dtype", "float32"},
                      {"op", "sum"},
                      {"root", s.root},
                      {"ranks", ranks},
                      {"transport", "mpi"},
                      {"iterations", iterations},
                      {"timing", s.latency ? "latency" : "stream"},
                      {"time_us", time_us},
                      {"min_time_us", min * 1e6},
                      {"max_time_us", max * 1e6},
                      {"algbw_gbps", algbw},
                      {"busbw_gbps", busbw},
                      {"wrong", all}});
    }
  }
  if (rank == 0 && !s.json.empty()) {
    std::ofstream out(s.json);
    out << rows.dump(2) << "\n";
    if (!out) fmt::print(stderr, "canopy-mpi-bench: cannot write '{}'\n", s.json);
  }
  return total_wrong == 0 ? 0 : 2;
}

}  // namespace
}  // namespace canopy::bench

int main(int argc, char** argv) {
  canopy::bench::Settings s;
  s.min_size = "4";
  CLI::App app{"canopy-mpi-bench: MPI's collectives timed as canopy-bench times Canopy's"};
  canopy::bench::add_sweep_flags(app, s,
                                 "allreduce|broadcast|reduce|allgather|reducescatter|alltoall|gather|scatter|all");
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    app.parse(argc, argv);
    status = canopy::bench::run(s);
  } catch (const CLI::ParseError& e) {
    status = app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "canopy-mpi-bench: {}\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
