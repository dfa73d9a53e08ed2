#include "launcher/launch_options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string_view>

#include "canopy/error.hpp"
#include "common/settings.hpp"
#include "rendezvous/etcd_store.hpp"

namespace canopy::launcher {
namespace {

constexpr const char* kUsageHint = "Run 'canopy-run --help' for usage.";

ParsedCommandLine usage_error(const std::string& what) {
  return ParsedCommandLine{std::nullopt, fmt::format("canopy-run: {}\n{}\n", what, kUsageHint), 2};
}

// Which of the flags that place a node by hand were given: none of them has a meaning with etcd.
struct PlacementFlags {
  bool node_rank = false, master_addr = false, master_port = false, listen_addr = false;
  std::string first() const {
    return node_rank ? "--node-rank" : master_addr ? "--master-addr" : master_port ? "--master-port"
                                   : listen_addr   ? "--listen-addr"
                                                   : "";
  }
};

// The checks of --nnodes MIN:MAX and the --rdzv-* flags against the others; empty when they hang together.
std::string rdzv_contradiction(const LaunchOptions& o, const PlacementFlags& placed, bool id_given,
                               bool conf_given) {
  const RdzvOptions& r = o.rdzv;
  const std::string nodes = r.nodes.min == r.nodes.max ? std::to_string(r.nodes.min) : r.nodes.text();
  if (r.backend == RdzvBackend::Etcd) {
    if (!rendezvous::etcd_built())
      return "--rdzv-backend etcd: this canopy-run was built without libcurl, which the etcd store needs "
             "(install libcurl4-openssl-dev and build again)";
    if (r.endpoints.empty())
      return "--rdzv-backend etcd needs --rdzv-endpoint HOST:PORT[,HOST:PORT...], the client addresses of "
             "the etcd cluster's members";
    if (!id_given)
      return "--rdzv-backend etcd needs --rdzv-id JOB: the same name on every node of the job, and another "
             "for each job";
    if (!placed.first().empty())
      return fmt::format(
          "{} has no meaning with --rdzv-backend etcd: the nodes take their places in the order they meet in "
          "etcd, and none of them hosts a store",
          placed.first());
    if (o.elastic)
      return fmt::format(
          "--elastic counts the ranks of one node; with --rdzv-backend etcd the job is elastic in nodes: "
          "--nnodes MIN:MAX (here {})",
          nodes);
    if (!o.job_token)
      return "--rdzv-backend etcd needs CANOPY_JOB_TOKEN set to the same secret on every node, for example "
             "export CANOPY_JOB_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')";
    return {};
  }
  if (r.nodes.min != r.nodes.max)
    return fmt::format(
        "--nnodes {} needs --rdzv-backend etcd: only a store that outlives every node lets the others go on "
        "when one is lost, and {}",
        nodes,
        r.backend == RdzvBackend::C10d ? "c10d's store lives in node 0's canopy-run"
                                       : "without a backend the store lives in node 0's canopy-run");
  if (conf_given) return "--rdzv-conf is read with --rdzv-backend etcd only";
  if (r.backend == RdzvBackend::C10d) {
    if (r.endpoints.size() != 1)
      return "--rdzv-backend c10d needs one --rdzv-endpoint HOST:PORT: node 0's store, which node 0 hosts";
    if (placed.master_addr || placed.master_port)
      return "--rdzv-endpoint and --master-addr/--master-port name the same store: give one of them";
    if (r.nodes.max > 1 && !placed.node_rank)
      return "--rdzv-backend c10d needs --node-rank on every node: node 0 hosts the store at --rdzv-endpoint "
             "(only --rdzv-backend etcd lets the nodes find their places by themselves)";
  } else if (id_given) {
    return "--rdzv-id names a job in the store of --rdzv-backend etcd (or c10d); without a backend it has "
           "no use";
  }
  return {};
}

// The checks that span several flags, which CLI11 cannot express; empty when the options hang together.
std::string contradiction(const LaunchOptions& o, bool port_given, bool addr_given) {
  if (o.rdzv.elastic_nodes()) return {};  // rdzv_contradiction covers every flag that still applies
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
  std::string nnodes = "1";
  std::string backend, endpoints, conf;

  CLI::App app{
      "Starts the ranks of a Canopy job on this node, hosts the store on node 0 (or, with --rdzv-backend "
      "etcd, meets the other nodes in etcd), prefixes their output, stops them all when one fails and "
      "restarts them if asked.",
      "canopy-run"};
  app.add_option("--nproc,--nproc-per-node", o.nproc, "Ranks to start on this node")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--nnodes", nnodes,
                 "Nodes in the job (one canopy-run on each): N, or MIN:MAX with --rdzv-backend etcd (a lost "
                 "node leaves the others running while MIN are left; a node started later joins)")
      ->capture_default_str();
  auto* node_rank_option =
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
  auto* listen_option = app.add_option("--listen-addr", o.listen_addr,
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
  auto* backend_option = app.add_option(
      "--rdzv-backend", backend,
      "etcd: the nodes meet in an etcd cluster, which outlives any of them; c10d: node 0 hosts a TcpStore "
      "at --rdzv-endpoint (its loss ends the job); default: --master-addr's TcpStore on node 0");
  auto* endpoint_option = app.add_option(
      "--rdzv-endpoint", endpoints,
      "HOST:PORT[,HOST:PORT...]: the etcd members' client addresses, or c10d's one store");
  auto* id_option =
      app.add_option("--rdzv-id", o.rdzv.id, "The job's name in the store, the same on every node of it");
  auto* conf_option = app.add_option(
      "--rdzv-conf", conf,
      "KEY=VALUE[,...] for etcd: join_timeout (600 s: for the first MIN nodes), last_call_timeout (1 s: "
      "for more, once MIN are there), node_ttl (5 s: how long a dead launcher counts as a node)");
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
      "CANOPY_ELASTIC, and CANOPY_ELASTIC_JOIN=1 on a replacement; with --rdzv-backend etcd, MASTER_ADDR\n"
      "is the etcd store (etcd://.../canopy-run/<rdzv-id>) and there is no MASTER_PORT\n"
      "(see docs/LAUNCHER.md).");
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
    o.rdzv.nodes = parse_node_range(nnodes);
    if (backend_option->count() > 0) {
      o.rdzv.backend = parse_rdzv_backend(backend);
    } else if (endpoint_option->count() > 0) {
      o.rdzv.backend = RdzvBackend::C10d;  // torchrun's meaning of an endpoint without a backend
    }
    if (endpoint_option->count() > 0) o.rdzv.endpoints = parse_rdzv_endpoints(endpoints);
    if (id_option->count() > 0) check_rdzv_id(o.rdzv.id);
    if (conf_option->count() > 0) apply_rdzv_conf(conf, o.rdzv);
  } catch (const Error& e) {
    return usage_error(e.what());
  }
  o.nnodes = o.rdzv.nodes.max;
  const PlacementFlags placed{node_rank_option->count() > 0, addr_option->count() > 0,
                              port_option->count() > 0, listen_option->count() > 0};
  if (std::string problem = rdzv_contradiction(o, placed, id_option->count() > 0, conf_option->count() > 0);
      !problem.empty())
    return usage_error(problem);
  if (o.rdzv.backend == RdzvBackend::C10d) {  // the endpoint is node 0's store, as --master-addr/-port
    const std::string& endpoint = o.rdzv.endpoints.front();
    const auto colon = endpoint.rfind(':');
    o.master_addr = endpoint.substr(0, colon);
    if (o.master_addr.starts_with('[')) o.master_addr = o.master_addr.substr(1, o.master_addr.size() - 2);
    port = std::stoi(endpoint.substr(colon + 1));
  }
  if (o.stop_grace > std::chrono::hours(1))
    return usage_error(fmt::format("--stop-grace {} is more than 3600 seconds", grace));
  const bool c10d = o.rdzv.backend == RdzvBackend::C10d;
  bool port_given = port_option->count() > 0 || c10d;
  if (port_given) {
    o.master_port = static_cast<std::uint16_t>(port);
  } else {
    o.master_port = o.nnodes > 1 ? kDefaultMultiNodePort : 0;
  }
  const bool addr_given = addr_option->count() > 0 || c10d;
  if (std::string problem = contradiction(o, port_given, addr_given); !problem.empty()) {
    return usage_error(problem);
  }
  if (o.listen_addr.empty() && o.nnodes == 1) o.listen_addr = o.master_addr;
  return ParsedCommandLine{std::move(o), {}, 0};
}

}  // namespace canopy::launcher
