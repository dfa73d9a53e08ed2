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
#include "launcher/rdzv_options.hpp"

namespace canopy::launcher {

// The port of a multi-node job when --master-port is not given (torchrun's default). A single-node job
// picks a free port instead, so that two jobs (or two tests) on one machine never clash.
inline constexpr std::uint16_t kDefaultMultiNodePort = 29500;

// Where this node's ranks stand in a job whose nodes met through the store (--rdzv-backend etcd): known only
// once the launchers have agreed on the members (node_rendezvous.hpp).
struct NodePlacement {
  int node_index = 0;   // GROUP_RANK: the position in the members' list (a joining node: after them)
  int first_rank = 0;   // the global rank of local rank 0
  int world_size = 1;   // the ranks of every node in the list (a joining node: up to its own)
  bool joins = false;   // started after the members were fixed: its ranks join the running group
  std::string store_address;  // etcd://.../canopy-run/<id>, the ranks' CANOPY_MASTER_ADDR
  ElasticRange job_ranks;     // CANOPY_ELASTIC: MIN * nproc : MAX * nproc
};

struct LaunchOptions {
  int nproc = 1;      // ranks on this node
  int nnodes = 1;     // nodes in the job (with --nnodes MIN:MAX, MAX)
  int node_rank = 0;  // this node's index; node 0 hosts the store (not with --rdzv-backend etcd)
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
  RdzvOptions rdzv;                      // --nnodes as a range and the --rdzv-* flags
  std::optional<NodePlacement> placement;  // set by the node rendezvous, before any rank starts

  int world_size() const { return placement ? placement->world_size : nnodes * nproc; }
  int global_rank(int local_rank) const {
    return placement ? placement->first_rank + local_rank : node_rank * nproc + local_rank;
  }
  // Through etcd no node hosts a store: the launchers meet in it, and so do the ranks.
  bool hosts_store() const { return node_rank == 0 && !rdzv.elastic_nodes(); }
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
