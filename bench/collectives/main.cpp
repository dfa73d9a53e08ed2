// canopy-bench: every collective and algorithm measured side by side across the ranks of a group,
// in the shape of nccl-tests' output. Run it under canopy-run, torchrun, srun or mpirun:
//
//   canopy-run --nproc 4 canopy-bench allreduce --algo all -b 8 -e 64M
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/collectives/measurement.hpp"
#include "bench/collectives/report.hpp"
#include "bench/collectives/sizes.hpp"
#include "canopy/canopy.hpp"
#include "collectives/schedules/algorithms.hpp"

namespace canopy::bench {
namespace {

struct Settings {
  std::string collective = "allreduce";
  std::string algorithms = "auto";
  std::string min_size = "8", max_size = "64M";
  std::uint64_t factor = 2;
  int iterations = 20, warmup = 5, check = 1;
  std::string dtype = "float32", op = "sum";
  int root = 0;
  bool in_place = false;
  std::string json, csv;
};

std::vector<Collective> collectives_named(const std::string& name) {
  const std::vector<Collective> all{Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                                    Collective::AllGather, Collective::ReduceScatter, Collective::Barrier};
  if (name == "all") return all;
  for (Collective c : all)
    if (command_name(c) == name) return {c};
  throw CLI::ValidationError("collective", fmt::format("unknown collective '{}'", name));
}

std::vector<std::string> algorithms_for(Collective collective, const std::string& list) {
  std::vector<std::string> names;
  if (list == "all") {
    for (const auto& a : collectives::algorithms(collective)) names.emplace_back(a.name);
    return names;
  }
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = std::min(list.find(',', start), list.size());
    std::string name = list.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    if (name == "auto" || collectives::find_algorithm(collective, name) != nullptr) names.push_back(name);
  }
  return names;
}

int run(const Settings& s) {
  auto dtype = parse_data_type(s.dtype);
  auto op = parse_reduce_op(s.op);
  if (!dtype) throw CLI::ValidationError("--dtype", fmt::format("unknown type '{}'", s.dtype));
  if (!op) throw CLI::ValidationError("--op", fmt::format("unknown op '{}'", s.op));
  auto sizes = size_sweep(parse_size(s.min_size), parse_size(s.max_size), s.factor);

  Communicator comm = Communicator::from_environment();
  bool leader = comm.rank() == 0;
  RunInfo info;
  info.ranks = comm.size();
  info.link = comm.link_estimate();
  std::vector<std::int64_t> hosts{comm.local_rank() == 0 ? 1 : 0};
  comm.all_reduce(std::span(hosts), ReduceOp::Sum, {.algorithm = "ring"});
  info.hosts = static_cast<int>(hosts[0]);

  Measurement measurement(comm);
  TablePrinter table(stdout);
  std::vector<BenchResult> results;
  std::uint64_t total_wrong = 0;
  for (Collective collective : collectives_named(s.collective)) {
    auto names = algorithms_for(collective, s.algorithms);
    if (names.empty()) continue;
    if (leader) table.header(collective, info);
    auto collective_sizes = collective == Collective::Barrier ? std::vector<std::uint64_t>{0} : sizes;
    for (std::uint64_t bytes : collective_sizes) {
      for (const std::string& name : names) {
        BenchCase c{collective, name, bytes, *dtype, *op, s.root, s.in_place, s.iterations, s.warmup, s.check != 0};
        BenchResult r = measurement.run(c);
        total_wrong += r.wrong;
        if (leader) table.row(r);
        results.push_back(r);
      }
    }
    if (leader) table.footer();
  }
  if (leader && !s.json.empty()) write_json(s.json, info, results);
  if (leader && !s.csv.empty()) write_csv(s.csv, info, results);
  if (total_wrong > 0) {
    if (leader) fmt::print(stderr, "canopy-bench: {} wrong elements\n", total_wrong);
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace canopy::bench

int main(int argc, char** argv) {
  canopy::bench::Settings s;
  CLI::App app{"canopy-bench: measure every collective and algorithm across the ranks of a group"};
  app.add_option("collective", s.collective, "broadcast|reduce|allreduce|allgather|reducescatter|barrier|all")
      ->capture_default_str();
  app.add_option("--algo", s.algorithms, "algorithms: a comma-separated list, 'all' or 'auto'")->capture_default_str();
  app.add_option("-b,--minbytes", s.min_size, "smallest size (suffixes K, M, G)")->capture_default_str();
  app.add_option("-e,--maxbytes", s.max_size, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", s.factor, "size multiplication factor")->capture_default_str();
  app.add_option("-n,--iters", s.iterations, "timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", s.warmup, "untimed iterations before timing")->capture_default_str();
  app.add_option("-c,--check", s.check, "check results exactly (0 = off)")->capture_default_str();
  app.add_option("--dtype", s.dtype, "float32 float64 float16 bfloat16 int8 uint8 int32 int64")->capture_default_str();
  app.add_option("--op", s.op, "sum prod min max avg")->capture_default_str();
  app.add_option("--root", s.root, "root of broadcast and reduce")->capture_default_str();
  app.add_flag("--inplace", s.in_place, "run in place");
  app.add_option("--json", s.json, "write every row as JSON to this file");
  app.add_option("--csv", s.csv, "write every row as CSV to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    return canopy::bench::run(s);
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "canopy-bench: {}\n", e.what());
    return 1;
  }
}
