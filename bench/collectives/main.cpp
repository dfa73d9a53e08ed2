// canopy-bench: every collective and algorithm measured side by side across the ranks of a group,
// in the shape of nccl-tests' output. Run it under canopy-run, torchrun, srun or mpirun:
//
//   canopy-run --nproc 4 canopy-bench allreduce --algo all -b 8 -e 64M [--ceiling] [--plot sweep.svg]
//
// and, without a group, its subcommands: canopy-bench trace | ceiling | cpu | plot | compare | choice
// (commands.hpp; see --help of each).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "bench/collectives/ceiling.hpp"
#include "bench/collectives/commands.hpp"
#include "bench/collectives/measurement.hpp"
#include "bench/collectives/memory_ceiling.hpp"
#include "bench/collectives/phases.hpp"
#include "bench/collectives/plot.hpp"
#include "bench/collectives/progress.hpp"
#include "bench/collectives/report.hpp"
#include "bench/collectives/selection.hpp"
#include "bench/collectives/sweep_flags.hpp"
#include "bench/collectives/transport_in_use.hpp"
#include "bench/collectives/windows.hpp"
#include "bench/startup/process_facts.hpp"
#include "canopy/canopy.hpp"
#include "collectives/communicator_settings.hpp"
#include "common/cpu_list.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"

namespace canopy::bench {
namespace {

// Timed for at least this long a size, in kDefaultWindows windows: windows of a few milliseconds measure
// the scheduler's luck where ranks outnumber cores (windows.hpp).
constexpr auto kDefaultMinTime = "200";

struct Settings {
  Settings() { sweep.min_time = kDefaultMinTime; }
  SweepFlags sweep;  // what canopy-mpi-bench takes too
  int windows = kDefaultWindows;
  std::string algorithms = "auto";
  std::string check = "1";
  std::string dtype = "float32", op = "sum";
  bool in_place = false;
  std::string csv;
  std::string chunk_bytes = "0";
  bool ceiling = false;
  std::string plot;
  bool progress = true;
};

// What to run: each collective with its algorithms. With several collectives ("all"), an algorithm
// that one of them lacks is skipped there; a name no collective knows is an error.
std::vector<std::pair<Collective, std::vector<std::string>>> plan_of(const Settings& s) {
  auto collectives = collectives_named(s.sweep.collective);
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

// The CPUs of this host that any rank may use (the union of every rank's), in every rank.
std::vector<int> host_cpus(Communicator& comm) {
  constexpr int kMostCpus = 4096;
  std::vector<std::uint8_t> usable(kMostCpus, 0);
  for (int cpu : allowed_cpus())
    if (cpu < kMostCpus) usable[static_cast<std::size_t>(cpu)] = 1;
  comm.all_reduce(std::span(usable), ReduceOp::Max);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < kMostCpus; ++cpu)
    if (usable[static_cast<std::size_t>(cpu)] != 0) cpus.push_back(cpu);
  return cpus;
}

// --ceiling, measured by rank 0 while the others wait in their first collective: where the ranks share
// the host's memory, its copy and reduce rates; over TCP, the loopback exchange. Said on stderr where it
// cannot be measured; the sweep goes on.
void measure_ceilings(Communicator& comm, RunInfo& info) {
  const bool shared_memory = info.hosts == 1 && info.transport.name.starts_with("shm");
  const std::vector<int> cpus = shared_memory ? host_cpus(comm) : std::vector<int>{};
  if (comm.rank() != 0) return;
  if (!shared_memory) {
    info.loopback_each_way_gbps = measure_ceiling(info);
    return;
  }
  try {
    info.memory = measure_memory_rates(cpus);
  } catch (const std::exception& e) {
    fmt::print(stderr, "canopy-bench: could not measure the memory's rates: {}\n", e.what());
  }
}

// The sweep's settings, parsed and checked before any group forms.
struct Parsed {
  std::vector<std::pair<Collective, std::vector<std::string>>> plan;
  std::vector<std::uint64_t> sizes;
  BenchCase each;  // every case's settings but the collective, the algorithm and the size
};

Parsed parse(const Settings& s) {
  auto dtype = parse_data_type(s.dtype);
  auto op = parse_reduce_op(s.op);
  if (!dtype) throw CLI::ValidationError("--dtype", fmt::format("unknown type '{}'", s.dtype));
  if (!op) throw CLI::ValidationError("--op", fmt::format("unknown op '{}'", s.op));
  if (s.windows < 1) throw CLI::ValidationError("--windows", "must be 1 or more");
  Parsed p;
  p.sizes = s.sweep.sizes();
  p.plan = plan_of(s);
  p.each.dtype = *dtype;
  p.each.op = *op;
  p.each.root = s.sweep.root;
  p.each.in_place = s.in_place;
  p.each.iterations = s.sweep.iterations;
  p.each.warmup = s.sweep.warmup;
  p.each.min_seconds = s.sweep.min_time_seconds();
  p.each.windows = s.windows;
  p.each.latency = s.sweep.latency;
  p.each.check = settings::parse_flag("--check", s.check);
  p.each.chunk_bytes = settings::parse_size("--chunk-bytes", s.chunk_bytes);
  if (!s.plot.empty()) require_plot_tools(s.plot);  // before the sweep, not after it
  return p;
}

// What describes the whole run, from the communicator itself: no collective (the host count is its layout's).
RunInfo run_info(const Settings& s, Communicator& comm) {
  RunInfo info;
  info.ranks = comm.size();
  info.hosts = comm.host_count();
  info.link = comm.link_estimate();
  info.latency = s.sweep.latency;
  info.transport = transport_in_use(comm);
  const auto settings = collectives::CommunicatorSettings::from(canopy::Settings::from_environment());
  info.chunk_bytes = settings.chunk_bytes;
  // The bound's assumption: every pair that shares memory may read each other's (the kernel's say is per
  // pair).
  if (info.transport.name == "shm+tcp") info.single_copy_bytes = settings.mesh.settings.shm.single_copy_bytes;
  if (s.ceiling) measure_ceilings(comm, info);
  return info;
}

// Every case of the plan, its rows printed by rank 0 as they come; 2 where a result was wrong (on rank 0:
// any rank's; elsewhere: its own), else 0.
int measure_plan(const Settings& s, const Parsed& p, Communicator& comm, Phases& phases, double formed) {
  const bool leader = comm.rank() == 0;
  const RunInfo info = run_info(s, comm);
  phases.mark("bookkeeping");
  int steps = 0;
  for (const auto& [collective, names] : p.plan)
    steps += static_cast<int>(names.size() * (collective == Collective::Barrier ? 1 : p.sizes.size()));
  ProgressLine progress(stderr, steps, leader && s.progress);

  Measurement measurement(comm, phases, formed);
  TablePrinter table(stdout);
  std::vector<BenchResult> results;
  std::uint64_t total_wrong = 0;
  int done = 0;
  for (const auto& [collective, names] : p.plan) {
    if (leader) table.header(collective, info);
    auto collective_sizes = collective == Collective::Barrier ? std::vector<std::uint64_t>{0} : p.sizes;
    for (std::uint64_t bytes : collective_sizes) {
      for (const std::string& name : names) {
        progress.starting(
            done++, fmt::format("{} {} {}", command_name(collective), name, settings::format_size(bytes)));
        BenchCase c = p.each;
        c.collective = collective;
        c.algorithm = name;
        c.bytes = bytes;
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
  if (leader && !s.sweep.json.empty()) write_json(s.sweep.json, info, results);
  if (leader && !s.csv.empty()) write_csv(s.csv, info, results);
  if (leader && !s.plot.empty()) draw_plot(results_json(info, results), s.plot);
  phases.mark("report");
  if (leader && measurement.last_formed_since_launch() >= 0)
    phases.note(fmt::format("the last rank formed its group {:.2f} s after the launch",
                            measurement.last_formed_since_launch()));
  if (total_wrong > 0) {
    if (leader) fmt::print(stderr, "canopy-bench: {} wrong elements\n", total_wrong);
    return 2;
  }
  return 0;
}

int sweep(const Settings& s) {
  const double launch_seconds = startup::seconds_since_launch(startup::realtime_ns()).value_or(-1);
  Phases phases;
  const Parsed parsed = parse(s);
  phases.mark("parsing");
  auto comm = std::make_unique<Communicator>(Communicator::from_environment());
  phases.mark("forming");
  const double formed = startup::seconds_since_launch(startup::realtime_ns()).value_or(-1);
  const int status = measure_plan(s, parsed, *comm, phases, formed);
  const bool leader = comm->rank() == 0;
  comm.reset();
  phases.mark("closing");
  if (leader) log::info("canopy-bench: {}", phases.line(launch_seconds));
  return status;
}

void add_sweep_options(CLI::App& app, Settings& s) {
  add_sweep_flags(app, s.sweep, "broadcast|reduce|allreduce|allgather|reducescatter|barrier|all");
  app.add_option("--algo", s.algorithms,
                 "algorithms: a comma-separated list of names, 'all' (every algorithm) and 'auto' (the cost "
                 "model's choice)")
      ->capture_default_str();
  app.add_option("-c,--check", s.check, "check results exactly (0 = off)")->capture_default_str();
  app.add_option("--dtype", s.dtype, "float32 float64 float16 bfloat16 int8 uint8 int32 int64")
      ->capture_default_str();
  app.add_option("--op", s.op, "sum prod min max avg")->capture_default_str();
  app.add_flag("--inplace", s.in_place, "run in place");
  app.add_option("--windows", s.windows,
                 "time each size's calls in this many windows back to back: the row shows the median window, "
                 "their spread, and flags (!) a size whose windows differ by more than a quarter")
      ->capture_default_str();
  app.add_option("--csv", s.csv, "write every row as CSV to this file");
  app.add_option("--chunk-bytes", s.chunk_bytes, "pipelining granularity (0 = CANOPY_CHUNK_BYTES or 1M)")
      ->capture_default_str();
  app.add_flag(
      "--ceiling", s.ceiling,
      "measure first (rank 0) what bounds ranks on one host: over shared memory the copy and reduce rates "
      "of every core at once, and each row's time against the time its copies and reduces take at them; "
      "over TCP the loopback exchange rate, and busbw as a percentage of the ceiling it implies");
  app.add_option("--plot", s.plot, "draw busbw vs size per algorithm into FILE.svg or FILE.png (gnuplot)");
  app.add_flag("!--no-progress", s.progress,
               "no progress line (it is only ever drawn on a terminal, by rank 0)");
}

}  // namespace
}  // namespace canopy::bench

int main(int argc, char** argv) {
  using namespace canopy::bench;
  Settings settings;
  CLI::App app{
      "canopy-bench: measure every collective and algorithm across the ranks of a group (the sweep), or one "
      "of the subcommands below"};
  add_sweep_options(app, settings);
  Command chosen = [&] { return run_guarded(app, "", [&] { return sweep(settings); }); };
  add_subcommands(app, chosen);
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  return chosen();
}
