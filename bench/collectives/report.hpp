// The benchmark's output: an nccl-tests-shaped table for people, JSON and CSV for programs.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/collectives/measurement.hpp"

namespace canopy::bench {

// What describes the whole run, stored beside every JSON/CSV row.
struct RunInfo {
  int ranks = 1;
  int hosts = 1;
  std::string transport = "tcp";
  Communicator::LinkEstimate link;
};

// The name used on the command line and in JSON: "allreduce", "broadcast", ...
std::string command_name(Collective collective);

class TablePrinter {
 public:
  explicit TablePrinter(std::FILE* out) : out_(out) {}
  void header(Collective collective, const RunInfo& info);
  void row(const BenchResult& result);
  void footer();

 private:
  std::FILE* out_;
  double busbw_sum_ = 0;
  int rows_ = 0;
};

void write_json(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results);
void write_csv(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results);

}  // namespace canopy::bench
