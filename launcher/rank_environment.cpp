#include "launcher/rank_environment.hpp"

namespace canopy::launcher {

EnvMap rank_environment(const EnvMap& base, const LaunchOptions& options, const LaunchRound& round,
                        int local_rank, RankStart start) {
  EnvMap env = base;
  auto set_both = [&env](const std::string& canopy_name, const std::string& torch_name,
                         const std::string& value) {
    env[canopy_name] = value;
    env[torch_name] = value;
  };
  set_both("CANOPY_RANK", "RANK", std::to_string(options.global_rank(local_rank)));
  set_both("CANOPY_WORLD_SIZE", "WORLD_SIZE", std::to_string(options.world_size()));
  set_both("CANOPY_LOCAL_RANK", "LOCAL_RANK", std::to_string(local_rank));
  set_both("CANOPY_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", std::to_string(options.nproc));
  set_both("CANOPY_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", std::to_string(round.restart_count));
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(options.max_restarts);  // torch programs may read it
  env["GROUP_RANK"] = std::to_string(options.placement ? options.placement->node_index : options.node_rank);
  // Replaced rather than inherited: values from an outer launcher would describe another job. A
  // replacement keeps the dead rank's RANK; its rank in the group is the grow's to decide (newcomers last).
  env.erase("CANOPY_ELASTIC");
  env.erase("CANOPY_ELASTIC_JOIN");
  // Across nodes (--rdzv-backend etcd) the job's range in ranks; options.elastic is then this node's own.
  if (options.placement) {
    env["CANOPY_ELASTIC"] = options.placement->job_ranks.text();
  } else if (options.elastic) {
    env["CANOPY_ELASTIC"] = options.elastic->text();
  }
  // A node that came after the members were fixed starts every rank as a newcomer.
  if (start == RankStart::Replacement || (options.placement && options.placement->joins))
    env.insert_or_assign("CANOPY_ELASTIC_JOIN", std::string("1"));
  // The CANOPY_ names win over torchrun's in the bootstrap: set both, so that a stale CANOPY_MASTER_PORT
  // inherited from an outer job cannot send the ranks to some other store. MASTER_PORT is torch's own.
  if (options.placement) {
    // The etcd store, which no process of the job hosts: an address with no port of its own.
    set_both("CANOPY_MASTER_ADDR", "MASTER_ADDR", options.placement->store_address);
    env.erase("CANOPY_MASTER_PORT");
    env.erase("MASTER_PORT");
  } else {
    set_both("CANOPY_MASTER_ADDR", "MASTER_ADDR", options.master_addr);
    env["CANOPY_MASTER_PORT"] = std::to_string(round.master_port);
    env["MASTER_PORT"] =
        std::to_string(round.torch_master_port != 0 ? round.torch_master_port : round.master_port);
  }
  env.insert_or_assign("CANOPY_STORE_HOSTED", std::string("1"));  // not `= "1"`: g++ 12 warns falsely
  env["CANOPY_JOB_TOKEN"] = round.job_token;
  // Always set: a value inherited from an outer launcher would describe that launcher's stderr.
  env.insert_or_assign("CANOPY_STDERR_IS_TERMINAL", std::string(round.stderr_is_terminal ? "1" : "0"));
  // The launch, which ranks count their start-up from (canopy-bench's INFO split): an earlier one a script
  // gave canopy-run is kept.
  if (const auto given = env.find("CANOPY_PROBE_LAUNCH_NS");
      round.launch_ns > 0 && (given == env.end() || given->second.empty()))
    env["CANOPY_PROBE_LAUNCH_NS"] = std::to_string(round.launch_ns);
  // All ranks of a one-node job share this host: their data connections stay on loopback unless the
  // user chose interfaces.
  if (options.nnodes == 1 && env.find("CANOPY_SOCKET_IFNAME") == env.end())
    env["CANOPY_SOCKET_IFNAME"] = "lo";
  return env;
}

std::vector<std::string> to_envp_strings(const EnvMap& env) {
  std::vector<std::string> strings;
  strings.reserve(env.size());
  for (const auto& [name, value] : env) strings.push_back(name + "=" + value);
  return strings;
}

}  // namespace canopy::launcher
