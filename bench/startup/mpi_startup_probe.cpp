// canopy-mpi-startup-probe: canopy-startup-probe's peer through MPI, for bench/startup/startup.sh:
//
//   CANOPY_PROBE_LAUNCH_NS=$(date +%s%N) mpirun -x CANOPY_PROBE_LAUNCH_NS --mca pml ob1
//     --mca btl tcp,self -np 64 canopy-mpi-startup-probe --out DIR [--sweep]
//
// MPI_Init stands for the communicator's construction; then one 4-byte float MPI_Allreduce, checked, and
// the same JSON line per rank. --sweep runs MPI_Allreduce at the same sizes as the Canopy probe's sweep and
// records the sockets again: Open MPI's TCP BTL connects to a peer on first use too.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/startup/process_facts.hpp"

namespace {

using canopy::bench::startup::realtime_ns;
using canopy::bench::startup::record_process;
using canopy::bench::startup::host_name;
using canopy::bench::startup::seconds_between;
using canopy::bench::startup::since_launch;


}  // namespace

int main(int argc, char** argv) {
  const std::int64_t entered = realtime_ns();
  std::string out;
  bool sweep = false;
  std::vector<std::uint64_t> sweep_bytes{4, 65536};
  CLI::App app{
      "canopy-mpi-startup-probe: MPI's start-up time, sockets and memory of one rank, as a JSON line"};
  app.add_option("--out", out, "directory for rank-<r>.json")->required();
  app.add_flag("--sweep", sweep, "record the sockets again after MPI_Allreduce at --sweep-bytes");
  app.add_option("--sweep-bytes", sweep_bytes, "sizes of the sweep, in bytes")
      ->delimiter(',')
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  nlohmann::ordered_json row;
  row["peer"] = "mpi";
  row["host"] = host_name();
  row["started_s"] = since_launch(entered);
  MPI_Init(&argc, &argv);
  const std::int64_t formed = realtime_ns();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float in = 1.0f, sum = 0.0f;
  MPI_Allreduce(&in, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const std::int64_t reduced = realtime_ns();
  row["rank"] = rank;
  row["size"] = size;
  row["transport"] = "mpi";
  row["construct_s"] = seconds_between(entered, formed);
  row["first_allreduce_s"] = seconds_between(formed, reduced);
  row["to_first_allreduce_s"] = since_launch(reduced);
  row["result_ok"] = sum == static_cast<float>(size);
  record_process(row, "");
  row["store_requests"] = nullptr;  // MPI has no store: its start-up goes through mpirun's PMIx server
  if (sweep) {
    const std::int64_t start = realtime_ns();
    std::uint64_t wrong = 0;
    for (std::uint64_t bytes : sweep_bytes) {
      std::vector<float> data(std::max<std::uint64_t>(1, bytes / sizeof(float)), 1.0f), result(data.size());
      MPI_Allreduce(data.data(), result.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      for (float x : result) wrong += x != static_cast<float>(size);
    }
    row["sweep_algorithms"] = {"mpi"};
    row["sweep_bytes"] = sweep_bytes;
    row["sweep_s"] = seconds_between(start, realtime_ns());
    row["sweep_wrong"] = wrong;
    record_process(row, "_after_sweep");
  }
  canopy::bench::startup::append_row(out, rank, row);
  MPI_Finalize();
  return row["result_ok"].get<bool>() ? 0 : 1;
}
