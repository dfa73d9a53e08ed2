// What canopy-run was asked to do, parsed from its command line (and CANOPY_JOB_TOKEN).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/elastic_range.hpp"
#include "common/env.hpp"
#include "launcher/output_budget.hpp"

namespace canopy::launcher {

// The port of a multi-node job when --master-port is not given (torchrun's default). A single-node job
// picks a free port instead, so that two jobs (or two tests) on one machine never clash.
inline constexpr std::uint16_t kDefaultMultiNodePort = 29500;

struct LaunchOptions {
  int nproc = 1;      // ranks on this node
  int nnodes = 1;     // nodes in the job
  int node_rank = 0;  // this node's index; node 0 hosts the store
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 0;  // 0: node 0 picks a free one
  std::string listen_addr;  // where node 0's store listens: loopback alone, every address with nnodes > 1
  // Without --elastic: whole-group restarts. With it: replacements of single dead ranks (rank_group.hpp).
  int max_restarts = 0;
  // --elastic MIN:MAX: a dead rank does not stop the others; it is replaced while restarts remain, and
  // the job fails only when fewer than MIN ranks are left (docs/LAUNCHER.md, "Elastic jobs").
  std::optional<ElasticRange> elastic;
  std::chrono::milliseconds stop_grace = std::chrono::seconds(5);  // SIGTERM -> SIGKILL
  // --output: auto until launch() resolves it from the descriptor budget (output_budget.hpp).
  OutputMode output = OutputMode::Auto;
  bool bind_to_core = false;  // --bind-to core: local rank i on the i-th allowed CPU (wrapping around)
  std::optional<std::string> job_token;  // CANOPY_JOB_TOKEN; generated on node 0 when absent
  std::vector<std::string> command;      // program and its arguments

  int world_size() const { return nnodes * nproc; }
  int global_rank(int local_rank) const { return node_rank * nproc + local_rank; }
  bool hosts_store() const { return node_rank == 0; }
};

// The outcome of parsing: options to run with, or text to print and an exit status (help, bad flags).
struct ParsedCommandLine {
  std::optional<LaunchOptions> options;
  std::string message;  // --help text, or the error for stderr
  int exit_code = 0;
};

// Parses canopy-run's arguments; `env` supplies CANOPY_JOB_TOKEN. Never throws for a bad command line.
ParsedCommandLine parse_command_line(int argc, const char* const* argv, const EnvMap& env);

}  // namespace canopy::launcher
