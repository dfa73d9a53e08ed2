#include "launcher/launch_options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string_view>

#include "canopy/error.hpp"
#include "common/settings.hpp"

namespace canopy::launcher {
namespace {

constexpr const char* kUsageHint = "Run 'canopy-run --help' for usage.";

ParsedCommandLine usage_error(const std::string& what) {
  return ParsedCommandLine{std::nullopt, fmt::format("canopy-run: {}\n{}\n", what, kUsageHint), 2};
}

// The checks that span several flags, which CLI11 cannot express; empty when the options hang together.
std::string contradiction(const LaunchOptions& o, bool port_given, bool addr_given) {
  if (o.elastic && o.nnodes > 1) {
    return fmt::format(
        "--elastic needs --nnodes 1: each node's canopy-run sees only its own ranks, and with no agreement "
        "between the launchers none of them can tell whether the job still has {} ranks alive",
        o.elastic->min);
  }
  if (o.elastic && !o.elastic->holds(o.world_size())) {
    return fmt::format("--elastic {} does not hold the job's {} ranks (--nproc {}): MIN <= {} <= MAX",
                       o.elastic->text(), o.world_size(), o.nproc, o.world_size());
  }
  if (o.node_rank >= o.nnodes) {
    return fmt::format("--node-rank {} is out of range for --nnodes {} (expected 0 to {})", o.node_rank,
                       o.nnodes, o.nnodes - 1);
  }
  if (o.nnodes > 1 && !addr_given) {
    return fmt::format("--nnodes {} needs --master-addr: the address of node 0, the same on every node",
                       o.nnodes);
  }
  if (o.nnodes > 1 && !o.job_token) {
    return fmt::format(
        "--nnodes {} needs CANOPY_JOB_TOKEN set to the same secret on every node, for example "
        "export CANOPY_JOB_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')",
        o.nnodes);
  }
  if (o.node_rank > 0 && port_given && o.master_port == 0) {
    return fmt::format(
        "--node-rank {} needs node 0's real --master-port (0 means 'pick a free port', which only node 0 "
        "can do)",
        o.node_rank);
  }
  return {};
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, const char* const* argv, const EnvMap& env) {
  LaunchOptions o;
  int port = -1;
  std::string grace = "5";
  bool no_prefix = false;
  std::string output = "auto";
  std::string bind_to = "none";
  std::string elastic;

  CLI::App app{
      "Starts the ranks of a Canopy job on this node, hosts the store on node 0, prefixes their "
      "output, stops them all when one fails and restarts them if asked.",
      "canopy-run"};
  app.add_option("--nproc,--nproc-per-node", o.nproc, "Ranks to start on this node")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--nnodes", o.nnodes, "Nodes in the job (one canopy-run on each)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--node-rank", o.node_rank, "This node's index, 0 to nnodes-1; node 0 hosts the store")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  auto* addr_option =
      app.add_option("--master-addr", o.master_addr, "Address of node 0, given to the ranks as MASTER_ADDR")
          ->capture_default_str();
  auto* port_option =
      app.add_option("--master-port", port,
                     "Port of node 0's store; default: a free port on one node, 29500 on several")
          ->check(CLI::Range(0, 65535));
  app.add_option("--listen-addr", o.listen_addr,
                 "Address node 0's store listens on; default: the master address on one node, every "
                 "address on several");
  app.add_option("--max-restarts", o.max_restarts,
                 "Restart the whole group up to this many times after a failure (with --elastic: start "
                 "this many replacements of single ranks)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  auto* elastic_option = app.add_option(
      "--elastic", elastic,
      "MIN:MAX: a dead rank does not stop the others; a replacement joins the running group (while "
      "--max-restarts lasts); the job fails when fewer than MIN ranks are left. One node only");
  app.add_option("--stop-grace", grace,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks (0 to 3600; or 500ms...)")
      ->capture_default_str();
  auto* output_option =
      app.add_option("--output", output,
                     "prefixed: every line through canopy-run with a \"[rank] \" prefix (2 pipes per rank); "
                     "direct: the ranks write to canopy-run's stdout and stderr themselves; auto: prefixed "
                     "while its pipes and the store's connections fit under the descriptor limit, else "
                     "direct, saying why")
          ->check(CLI::IsMember({"auto", "prefixed", "direct"}))
          ->capture_default_str();
  app.add_flag("--no-prefix", no_prefix, "The same as --output direct")->excludes(output_option);
  app.add_option("--bind-to", bind_to,
                 "none, or core: local rank i runs on the i-th CPU canopy-run may use (as mpirun binds), for "
                 "steadier benchmarks")
      ->check(CLI::IsMember({"none", "core"}))
      ->capture_default_str();
  app.footer(
      "The program and its arguments follow the options (after '--' if they start with '-').\n"
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,\n"
      "CANOPY_JOB_TOKEN, CANOPY_STORE_HOSTED=1 and CANOPY_RESTART_COUNT; with --elastic also\n"
      "CANOPY_ELASTIC, and CANOPY_ELASTIC_JOIN=1 on a replacement (see docs/LAUNCHER.md).");
  app.prefix_command();  // everything from the program name on belongs to the program

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return ParsedCommandLine{std::nullopt, app.help(), 0};
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }

  o.command = app.remaining();
  if (o.command.empty()) return usage_error("no program given: canopy-run [options] [--] program [args...]");
  // CLI11 hands over an unknown option as if it were the program; only after "--" may a program start with
  // '-'.
  bool after_dashes = o.command.front() == "--";
  if (after_dashes) {
    o.command.erase(o.command.begin());
    if (o.command.empty()) return usage_error("no program given after '--'");
  } else {
    auto program_index = static_cast<std::size_t>(argc) - o.command.size();
    after_dashes = program_index > 0 && std::string_view(argv[program_index - 1]) == "--";
  }
  if (o.command.front().starts_with('-') && !after_dashes) {
    return usage_error(fmt::format(
        "unknown option '{}' (a program whose name starts with '-' goes after '--')", o.command.front()));
  }

  o.job_token = env_value(env, "CANOPY_JOB_TOKEN");
  if (no_prefix || output == "direct") {
    o.output = OutputMode::Direct;
  } else {
    o.output = output == "prefixed" ? OutputMode::Prefixed : OutputMode::Auto;
  }
  o.bind_to_core = bind_to == "core";
  try {
    o.stop_grace = std::chrono::duration_cast<std::chrono::milliseconds>(
        settings::parse_duration("--stop-grace", grace));
  } catch (const Error& e) {
    return usage_error(e.what());
  }
  try {
    if (elastic_option->count() > 0) o.elastic = parse_elastic_range("--elastic", elastic);
  } catch (const Error& e) {
    return usage_error(e.what());
  }
  if (o.stop_grace > std::chrono::hours(1))
    return usage_error(fmt::format("--stop-grace {} is more than 3600 seconds", grace));
  bool port_given = port_option->count() > 0;
  if (port_given) {
    o.master_port = static_cast<std::uint16_t>(port);
  } else {
    o.master_port = o.nnodes > 1 ? kDefaultMultiNodePort : 0;
  }
  if (std::string problem = contradiction(o, port_given, addr_option->count() > 0); !problem.empty()) {
    return usage_error(problem);
  }
  if (o.listen_addr.empty() && o.nnodes == 1) o.listen_addr = o.master_addr;
  return ParsedCommandLine{std::move(o), {}, 0};
}

}  // namespace canopy::launcher
