// canopy-startup-probe: how long a job takes to start and what each rank holds once it has, run under a
// launcher by bench/startup/startup.sh:
//
//   CANOPY_PROBE_LAUNCH_NS=$(date +%s%N) canopy-run --nproc 64 canopy-startup-probe --out DIR [--ring]
//   [--sweep]
//
// Forms the world communicator as canopy-bench does (Communicator::from_environment), runs one 4-byte
// float all-reduce and checks it, then writes one JSON line per rank to DIR/rank-<r>.json: seconds from the
// launch to the end of that all-reduce, of the communicator's construction alone, descriptors and sockets
// open, resident memory. --ring and --sweep record the sockets again after a ring all-reduce and after
// every all-reduce algorithm at a few sizes, since connections made on first use grow with the traffic.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "bench/collectives/selection.hpp"
#include "bench/startup/process_facts.hpp"
#include "canopy/canopy.hpp"

namespace {

using canopy::bench::startup::realtime_ns;
using canopy::bench::startup::record_process;
using canopy::bench::startup::host_name;
using canopy::bench::startup::seconds_between;
using canopy::bench::startup::since_launch;

struct Flags {
  std::string out;
  bool ring = false;
  bool sweep = false;
  std::vector<std::uint64_t> sweep_bytes{4, 65536};
};


// Elements of an all-reduce of ones that differ from the group's size.
std::uint64_t wrong_sum(canopy::Communicator& comm, std::vector<float>& data, const std::string& algorithm) {
  std::fill(data.begin(), data.end(), 1.0f);
  comm.all_reduce(std::span(data), canopy::ReduceOp::Sum, {.algorithm = algorithm});
  std::uint64_t wrong = 0;
  for (float x : data) wrong += x != static_cast<float>(comm.size());
  return wrong;
}

// Every all-reduce algorithm canopy-bench's `--algo all` runs, at each size; the sockets are recorded after.
void sweep(canopy::Communicator& comm, const Flags& f, nlohmann::ordered_json& row) {
  const auto names = canopy::bench::algorithms_for(canopy::Collective::AllReduce, "all", false);
  const std::int64_t start = realtime_ns();
  std::uint64_t wrong = 0;
  for (std::uint64_t bytes : f.sweep_bytes) {
    std::vector<float> data(std::max<std::uint64_t>(1, bytes / sizeof(float)));
    for (const auto& name : names) wrong += wrong_sum(comm, data, name);
  }
  row["sweep_algorithms"] = names;
  row["sweep_bytes"] = f.sweep_bytes;
  row["sweep_s"] = seconds_between(start, realtime_ns());
  row["sweep_wrong"] = wrong;
  record_process(row, "_after_sweep");
}

int probe(const Flags& f) {
  const std::int64_t entered = realtime_ns();
  nlohmann::ordered_json row;
  row["peer"] = "canopy";
  row["host"] = host_name();
  row["started_s"] = since_launch(entered);
  int rank = -1;
  try {
    canopy::Communicator comm = canopy::Communicator::from_environment();
    const std::int64_t formed = realtime_ns();
    rank = comm.rank();
    std::vector<float> one{1.0f};
    comm.all_reduce(std::span(one), canopy::ReduceOp::Sum);
    const std::int64_t reduced = realtime_ns();
    row["rank"] = rank;
    row["size"] = comm.size();
    row["local_size"] = comm.local_size();
    row["transport"] = std::string(comm.transport_name());
    row["construct_s"] = seconds_between(entered, formed);
    row["first_allreduce_s"] = seconds_between(formed, reduced);
    row["to_first_allreduce_s"] = since_launch(reduced);
    row["result_ok"] = one[0] == static_cast<float>(comm.size());
    record_process(row, "");
    row["store_requests"] = comm.store_requests_sent();
    if (f.ring) {
      std::vector<float> data(1);
      row["ring_wrong"] = wrong_sum(comm, data, "ring");
      record_process(row, "_after_ring");
    }
    if (f.sweep) sweep(comm, f, row);
  } catch (const std::exception& e) {
    row["error"] = e.what();
    row["failed_s"] = since_launch(realtime_ns());
    fmt::print(stderr, "canopy-startup-probe: {}\n", e.what());
  }
  // A rank that failed before the communicator told it its rank files its row under the launcher's.
  canopy::bench::startup::append_row(f.out, rank >= 0 ? rank : canopy::bench::startup::launcher_rank(), row);
  return row.contains("error") || !row.value("result_ok", false) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"canopy-startup-probe: start-up time, sockets and memory of one rank, as a JSON line"};
  app.add_option("--out", f.out, "directory for rank-<r>.json")->required();
  app.add_flag("--ring", f.ring, "record the sockets again after a 4-byte ring all-reduce");
  app.add_flag("--sweep", f.sweep, "record them again after every all-reduce algorithm at --sweep-bytes");
  app.add_option("--sweep-bytes", f.sweep_bytes, "sizes of the sweep, in bytes")
      ->delimiter(',')
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return probe(f);
}
