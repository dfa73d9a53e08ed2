// canopy-bench: every collective and algorithm measured side by side across the ranks of a group,
// in the shape of nccl-tests' output. Run it under canopy-run, torchrun, srun or mpirun:
//
//   canopy-run --nproc 4 canopy-bench allreduce --algo all -b 8 -e 64M [--ceiling] [--plot sweep.svg]
//
// and, without a group: canopy-bench trace | ceiling | cpu | plot | compare | choice (see --help of each).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "bench/collectives/ceiling.hpp"
#include "bench/collectives/commands.hpp"
#include "bench/collectives/measurement.hpp"
#include "bench/collectives/plot.hpp"
#include "bench/collectives/progress.hpp"
#include "bench/collectives/report.hpp"
#include "bench/collectives/selection.hpp"
#include "bench/collectives/sizes.hpp"
#include "bench/collectives/transport_in_use.hpp"
#include "canopy/canopy.hpp"

namespace canopy::bench {
namespace {

struct Settings {
  std::string collective = "allreduce";
  std::string algorithms = "auto";
  std::string min_size = "8", max_size = "64M";
  std::uint64_t factor = 2;
  int iterations = 20, warmup = 5, check = 1;
  double min_time_ms = 0;
  bool latency = false;
  std::string dtype = "float32", op = "sum";
  int root = 0;
  bool in_place = false;
  std::string json, csv;
  std::string chunk_bytes = "0";
  bool ceiling = false;
  std::string plot;
  bool progress = true;
};

// What to run: each collective with its algorithms. With several collectives ("all"), an algorithm
// that one of them lacks is skipped there; a name no collective knows is an error.
std::vector<std::pair<Collective, std::vector<std::string>>> plan_of(const Settings& s) {
  auto collectives = collectives_named(s.collective);
  std::vector<std::pair<Collective, std::vector<std::string>>> plan;
  std::string first_error;
  for (Collective collective : collectives) {
    try {
      plan.emplace_back(collective, algorithms_for(collective, s.algorithms));
    } catch (const std::invalid_argument& e) {
      if (collectives.size() == 1) throw;
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (plan.empty()) throw std::invalid_argument(first_error);
  return plan;
}

// The loopback ceiling, measured by rank 0 while the others wait in their first collective; 0 when it
// does not apply (ranks on several hosts) or could not be measured (said on stderr, the sweep goes on).
double measure_ceiling(const RunInfo& info) {
  if (info.hosts > 1) {
    fmt::print(stderr,
               "canopy-bench: --ceiling measures loopback, which bounds ranks on one host only; "
               "these {} ranks are on {} hosts, so no ceiling is shown\n",
               info.ranks, info.hosts);
    return 0;
  }
  try {
    return measure_loopback_ceiling().each_way_gbps;
  } catch (const std::exception& e) {
    fmt::print(stderr, "canopy-bench: could not measure the loopback ceiling: {}\n", e.what());
    return 0;
  }
}

int sweep(const Settings& s) {
  auto dtype = parse_data_type(s.dtype);
  auto op = parse_reduce_op(s.op);
  if (!dtype) throw CLI::ValidationError("--dtype", fmt::format("unknown type '{}'", s.dtype));
  if (!op) throw CLI::ValidationError("--op", fmt::format("unknown op '{}'", s.op));
  auto sizes = size_sweep(parse_size(s.min_size), parse_size(s.max_size), s.factor);
  auto plan = plan_of(s);
  const std::size_t chunk_bytes = parse_size(s.chunk_bytes);
  if (!s.plot.empty()) require_plot_tools(s.plot);  // before the sweep, not after it

  Communicator comm = Communicator::from_environment();
  bool leader = comm.rank() == 0;
  RunInfo info;
  info.ranks = comm.size();
  info.link = comm.link_estimate();
  info.latency = s.latency;
  std::vector<std::int64_t> hosts{comm.local_rank() == 0 ? 1 : 0};
  comm.all_reduce(std::span(hosts), ReduceOp::Sum, {.algorithm = "ring"});
  info.hosts = static_cast<int>(hosts[0]);
  info.transport = transport_in_use(comm);
  if (s.ceiling && leader) info.loopback_each_way_gbps = measure_ceiling(info);

  int steps = 0;
  for (const auto& [collective, names] : plan)
    steps += static_cast<int>(names.size() * (collective == Collective::Barrier ? 1 : sizes.size()));
  ProgressLine progress(stderr, steps, leader && s.progress);

  Measurement measurement(comm);
  TablePrinter table(stdout);
  std::vector<BenchResult> results;
  std::uint64_t total_wrong = 0;
  int done = 0;
  for (const auto& [collective, names] : plan) {
    if (leader) table.header(collective, info);
    auto collective_sizes = collective == Collective::Barrier ? std::vector<std::uint64_t>{0} : sizes;
    for (std::uint64_t bytes : collective_sizes) {
      for (const std::string& name : names) {
        progress.starting(done++,
                          fmt::format("{} {} {}", command_name(collective), name, format_size(bytes)));
        BenchCase c{collective, name,         bytes,        *dtype,   *op,
                    s.root,     s.in_place,   s.iterations, s.warmup, s.min_time_ms / 1e3,
                    s.latency,  s.check != 0, chunk_bytes};
        BenchResult r = measurement.run(c);
        total_wrong += r.wrong;
        progress.clear();
        if (leader) table.row(r);
        results.push_back(r);
      }
    }
    if (leader) table.footer();
  }
  progress.clear();
  if (leader && !s.json.empty()) write_json(s.json, info, results);
  if (leader && !s.csv.empty()) write_csv(s.csv, info, results);
  if (leader && !s.plot.empty()) draw_plot(results_json(info, results), s.plot);
  if (total_wrong > 0) {
    if (leader) fmt::print(stderr, "canopy-bench: {} wrong elements\n", total_wrong);
    return 2;
  }
  return 0;
}

int sweep_command(int argc, char** argv) {
  Settings s;
  CLI::App app{
      "canopy-bench: measure every collective and algorithm across the ranks of a group.\n"
      "Also: canopy-bench trace | ceiling | cpu | plot | compare | choice (each with --help)"};
  app.add_option("collective", s.collective, "broadcast|reduce|allreduce|allgather|reducescatter|barrier|all")
      ->capture_default_str();
  app.add_option("--algo", s.algorithms,
                 "algorithms: a comma-separated list of names, 'all' (every algorithm) and 'auto' (the cost "
                 "model's choice)")
      ->capture_default_str();
  app.add_option("-b,--minbytes", s.min_size, "smallest size (suffixes K, M, G)")->capture_default_str();
  app.add_option("-e,--maxbytes", s.max_size, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", s.factor, "size multiplication factor")->capture_default_str();
  app.add_option("-n,--iters", s.iterations, "timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", s.warmup, "untimed iterations before timing")->capture_default_str();
  app.add_option(
         "--min-time", s.min_time_ms,
         "time each size for about this many milliseconds: at least -n iterations, and as many as the "
         "warm-up's slowest rank says fill the window (warm-up calls run slower: use -w 10 or more; "
         "0: exactly -n)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60000.0));
  app.add_flag(
      "--latency", s.latency,
      "a barrier before every timed call, and only the calls timed (OSU's method): one call's latency, "
      "which back-to-back calls hide (a broadcast's root never waits for its leaves)");
  app.add_option("-c,--check", s.check, "check results exactly (0 = off)")->capture_default_str();
  app.add_option("--dtype", s.dtype, "float32 float64 float16 bfloat16 int8 uint8 int32 int64")
      ->capture_default_str();
  app.add_option("--op", s.op, "sum prod min max avg")->capture_default_str();
  app.add_option("--root", s.root, "root of broadcast, reduce, gather and scatter")->capture_default_str();
  app.add_flag("--inplace", s.in_place, "run in place");
  app.add_option("--json", s.json, "write every row as JSON to this file");
  app.add_option("--csv", s.csv, "write every row as CSV to this file");
  app.add_option("--chunk-bytes", s.chunk_bytes, "pipelining granularity (0 = CANOPY_CHUNK_BYTES or 1M)")
      ->capture_default_str();
  app.add_flag(
      "--ceiling", s.ceiling,
      "measure the loopback exchange rate first (rank 0) and show busbw as a percentage of the ceiling "
      "it implies (ranks on one host)");
  app.add_option("--plot", s.plot, "draw busbw vs size per algorithm into FILE.svg or FILE.png (gnuplot)");
  app.add_flag("!--no-progress", s.progress,
               "no progress line (it is only ever drawn on a terminal, by rank 0)");
  CLI11_PARSE(app, argc, argv);
  try {
    return sweep(s);
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "canopy-bench: {}\n", e.what());
    return 1;
  }
}

}  // namespace
}  // namespace canopy::bench

int main(int argc, char** argv) {
  using Command = int (*)(int, char**);
  const std::pair<const char*, Command> commands[] = {
      {"trace", canopy::bench::trace_command},     {"ceiling", canopy::bench::ceiling_command},
      {"cpu", canopy::bench::cpu_command},         {"plot", canopy::bench::plot_command},
      {"compare", canopy::bench::compare_command}, {"choice", canopy::bench::choice_command}};
  if (argc > 1)
    for (const auto& [name, command] : commands)
      if (std::strcmp(argv[1], name) == 0) return command(argc - 1, argv + 1);
  return canopy::bench::sweep_command(argc, argv);
}
