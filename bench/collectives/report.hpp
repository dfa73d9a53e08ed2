// The benchmark's output: an nccl-tests-shaped table for people, JSON and CSV for programs.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/collectives/measurement.hpp"
#include "bench/collectives/memory_ceiling.hpp"
#include "bench/collectives/selection.hpp"
#include "bench/collectives/transport_in_use.hpp"

namespace canopy::bench {

// What describes the whole run, stored beside every JSON/CSV row.
struct RunInfo {
  int ranks = 1;
  int hosts = 1;
  TransportInUse transport{"tcp", "tcp"};
  Communicator::LinkEstimate link;
  // Measured in the same run (canopy-bench --ceiling): two processes exchanging over loopback, each
  // way. 0 = not measured; then no ceiling column and no ceiling keys.
  double loopback_each_way_gbps = 0;
  // Measured instead where the ranks share one host's memory (shm+tcp): copy and reduce rates of every
  // core at once; then each row shows the time its algorithm's copies and reduces take at those rates.
  MemoryRates memory;
  std::size_t chunk_bytes = 1 << 20;  // the library's default chunk (CANOPY_CHUNK_BYTES), for the bound
  std::uint64_t single_copy_bytes = 0;  // where messages go by single copy (CANOPY_SHM_SINGLE_COPY_BYTES)
  bool latency = false;               // --latency: calls timed one at a time (the header says so)
};

class TablePrinter {
 public:
  explicit TablePrinter(std::FILE* out) : out_(out) {}
  void header(Collective collective, const RunInfo& info);
  void row(const BenchResult& result);
  void footer();

 private:
  std::FILE* out_;
  RunInfo info_;
  Collective collective_ = Collective::AllReduce;
  double busbw_sum_ = 0;
  int rows_ = 0;
  int flagged_ = 0;  // rows whose windows' spread is large
};

// Every row as the JSON object written to --json (and drawn by --plot).
nlohmann::ordered_json results_json(const RunInfo& info, const std::vector<BenchResult>& results);
void write_json(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results);
void write_csv(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results);

}  // namespace canopy::bench
