// parse_launch_environment: which launcher started us, and what it told us.
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"
#include "rendezvous/bootstrap.hpp"
#include "rendezvous/etcd_address.hpp"
#include "rendezvous/store_address.hpp"

namespace canopy::rendezvous {
namespace {

// The variables one launcher sets. Empty names: the launcher does not set that one.
struct Convention {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

// In order of precedence: the launcher that starts processes inside another's comes first (canopy-run and
// torchrun under srun or mpirun, mpirun inside a SLURM job; srun never sets Open MPI's variables).
constexpr Convention kConventions[] = {
    {"canopy", "CANOPY_RANK", "CANOPY_WORLD_SIZE", "CANOPY_LOCAL_RANK", "CANOPY_LOCAL_WORLD_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""},  // local size: see slurm_local_size
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

// What one convention's variables say; nullopt where unset.
struct Reading {
  const Convention* convention = nullptr;
  std::optional<long long> rank, world_size, local_rank, local_world_size;
  // SLURM's variables without a step id: the job's batch script (or an salloc shell) and what it starts
  // directly, not a task of a step. They describe the allocation, not this process.
  bool outside_a_slurm_step = false;
  bool any() const { return rank || world_size; }
};

std::optional<long long> non_negative(const EnvMap& env, const char* name) {
  if (*name == '\0') return std::nullopt;
  auto value = env_integer(env, name);
  if (value && *value < 0) fail(ErrorCode::Config, "{}={} must not be negative", name, *value);
  if (value && *value > 1'000'000'000) fail(ErrorCode::Config, "{}={} is out of range", name, *value);
  return value;
}

// SLURM_NTASKS_PER_NODE when given, else this node's entry of SLURM_TASKS_PER_NODE ("4(x2),3": two
// nodes with 4 tasks, then one with 3), picked by SLURM_NODEID.
std::optional<long long> slurm_local_size(const EnvMap& env) {
  if (auto per_node = non_negative(env, "SLURM_NTASKS_PER_NODE")) return per_node;
  auto text = env_value(env, "SLURM_TASKS_PER_NODE");
  if (!text) return std::nullopt;
  auto bad = [&] { fail(ErrorCode::Config, "SLURM_TASKS_PER_NODE='{}' is not of the form 4(x2),3", *text); };
  std::vector<long long> per_node;  // one entry per node
  std::string_view rest = *text;
  while (!rest.empty()) {
    long long tasks = 0, repeat = 1;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), tasks);
    if (ec != std::errc() || tasks <= 0) bad();
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    if (rest.substr(0, 2) == "(x") {
      rest.remove_prefix(2);
      auto [end2, ec2] = std::from_chars(rest.data(), rest.data() + rest.size(), repeat);
      if (ec2 != std::errc() || repeat <= 0 || repeat > 1'000'000) bad();
      rest.remove_prefix(static_cast<std::size_t>(end2 - rest.data()));
      if (rest.empty() || rest.front() != ')') bad();
      rest.remove_prefix(1);
    }
    per_node.insert(per_node.end(), static_cast<std::size_t>(repeat), tasks);
    if (!rest.empty()) {
      if (rest.front() != ',') bad();
      rest.remove_prefix(1);
      if (rest.empty()) bad();
    }
  }
  if (auto node = non_negative(env, "SLURM_NODEID")) {
    if (*node >= static_cast<long long>(per_node.size()))
      fail(ErrorCode::Config, "SLURM_NODEID={} but SLURM_TASKS_PER_NODE='{}' lists only {} nodes", *node,
           *text, per_node.size());
    return per_node[static_cast<std::size_t>(*node)];
  }
  for (auto n : per_node)
    if (n != per_node.front()) return std::nullopt;  // uneven and no node id: derive through the store
  return per_node.front();
}

Reading read_convention(const EnvMap& env, const Convention& convention) {
  Reading r;
  r.convention = &convention;
  r.rank = non_negative(env, convention.rank);
  r.world_size = non_negative(env, convention.world_size);
  r.local_rank = non_negative(env, convention.local_rank);
  const bool slurm = std::string_view(convention.source) == "slurm";
  r.local_world_size = slurm ? slurm_local_size(env) : non_negative(env, convention.local_world_size);
  r.outside_a_slurm_step = slurm && !env_value(env, "SLURM_STEP_ID") && !env_value(env, "SLURM_STEPID");
  return r;
}

// A lower-precedence launcher's variables must agree with the chosen one's, unless they describe an
// outer launch with another world size (torchrun started by srun: SLURM_NTASKS counts the torchrun
// agents, WORLD_SIZE the workers).
void check_agreement(const Reading& chosen, const Reading& other) {
  if (!other.rank || other.outside_a_slurm_step) return;
  if (other.world_size && *other.world_size != *chosen.world_size) {
    log::debug("launch environment: ignoring {} ({}={}), an outer launch with {}={}",
               other.convention->source, other.convention->world_size, *other.world_size,
               chosen.convention->world_size, *chosen.world_size);
    return;
  }
  if (*other.rank != *chosen.rank)
    fail(ErrorCode::Config,
         "{}={} ({}) contradicts {}={} ({}): two launchers disagree about this process's rank; unset the "
         "stale one",
         chosen.convention->rank, *chosen.rank, chosen.convention->source, other.convention->rank,
         *other.rank, other.convention->source);
}

// The settings' flag grammar (common/settings.hpp): torchrun writes True and False.
bool parse_flag(const EnvMap& env, const char* name) {
  auto text = env_value(env, name);
  return text && settings::parse_flag(name, *text);
}

// The job id of the launcher that started this process comes first: mpirun inside a SLURM job gives its
// ranks Open MPI's one id, but SLURM's variables differ between nodes (the batch script's on one, a step's
// on the others).
std::string derive_job_token(const EnvMap& env, std::string_view source) {
  if (auto token = env_value(env, "CANOPY_JOB_TOKEN")) return *token;
  auto torchelastic = [&]() -> std::optional<std::string> {
    if (auto run = env_value(env, "TORCHELASTIC_RUN_ID")) return "torchelastic-" + *run;
    return std::nullopt;
  };
  auto slurm = [&]() -> std::optional<std::string> {
    auto job = env_value(env, "SLURM_JOB_ID");
    if (!job) return std::nullopt;
    auto step = env_value(env, "SLURM_STEP_ID");
    return "slurm-" + *job + (step ? "." + *step : std::string());
  };
  auto openmpi = [&]() -> std::optional<std::string> {
    if (auto job = env_value(env, "OMPI_MCA_ess_base_jobid")) return "ompi-" + *job;
    return std::nullopt;
  };
  std::optional<std::string> own = source == "torchrun"  ? torchelastic()
                                   : source == "slurm"   ? slurm()
                                   : source == "openmpi" ? openmpi()
                                                         : std::nullopt;
  if (own) return *own;
  for (const auto& derived : {torchelastic(), slurm(), openmpi()}) {
    if (derived) return *derived;
  }
  return "";
}

}  // namespace

LaunchInfo parse_launch_environment(const EnvMap& env) {
  std::vector<Reading> readings;
  for (const auto& convention : kConventions) readings.push_back(read_convention(env, convention));

  LaunchInfo info;
  const Reading* chosen = nullptr;
  for (const auto& reading : readings) {
    if (reading.any()) {
      chosen = &reading;
      break;
    }
  }
  if (chosen) {
    const Convention& c = *chosen->convention;
    if (!chosen->world_size)
      fail(ErrorCode::Config, "{} is set but {} is not: the {} launch convention needs both", c.rank,
           c.world_size, c.source);
    if (!chosen->rank)
      fail(ErrorCode::Config, "{} is set but {} is not: the {} launch convention needs both", c.world_size,
           c.rank, c.source);
    if (*chosen->world_size < 1)
      fail(ErrorCode::Config, "{}={} must be at least 1", c.world_size, *chosen->world_size);
    if (*chosen->rank >= *chosen->world_size)
      fail(ErrorCode::Config, "{}={} must be below {}={}", c.rank, *chosen->rank, c.world_size,
           *chosen->world_size);
    if (chosen->outside_a_slurm_step && *chosen->world_size > 1)
      fail(ErrorCode::Config,
           "SLURM_PROCID={} and SLURM_NTASKS={} but no SLURM_STEP_ID: this process runs in the job's batch "
           "script (or an salloc shell), not as one of its tasks; start the ranks with srun (or mpirun)",
           *chosen->rank, *chosen->world_size);
    for (const auto& other : readings)
      if (&other != chosen) check_agreement(*chosen, other);

    info.source = c.source;
    info.rank = static_cast<int>(*chosen->rank);
    info.world_size = static_cast<int>(*chosen->world_size);
    if (chosen->local_world_size) {
      if (*chosen->local_world_size < 1 || *chosen->local_world_size > info.world_size)
        fail(ErrorCode::Config, "{}={} must be between 1 and the world size {}",
             // SLURM has no one variable for it (see slurm_local_size): name the one it came from.
             *c.local_world_size != '\0'               ? c.local_world_size
             : env_value(env, "SLURM_NTASKS_PER_NODE") ? "SLURM_NTASKS_PER_NODE"
                                                       : "SLURM_TASKS_PER_NODE (this node's entry)",
             *chosen->local_world_size, info.world_size);
      info.local_world_size = static_cast<int>(*chosen->local_world_size);
    }
    if (chosen->local_rank) {
      long long limit = chosen->local_world_size ? *chosen->local_world_size : info.world_size;
      if (*chosen->local_rank >= limit)
        fail(ErrorCode::Config, "{}={} must be below the local world size {}", c.local_rank,
             *chosen->local_rank, limit);
      info.local_rank = static_cast<int>(*chosen->local_rank);
    }
  } else {
    info.source = "default";
  }

  if (auto dir = env_value(env, "CANOPY_STORE_FILE")) info.store_file = *dir;
  info.store_hosted_externally = parse_flag(env, "CANOPY_STORE_HOSTED");
  // torchrun's agent hosts a PyTorch TCPStore at MASTER_PORT: another protocol, and the port is taken.
  // With CANOPY_MASTER_PORT given, rank 0 hosts Canopy's store there instead.
  bool agent_store = parse_flag(env, "TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store && info.store_file.empty() && !env_value(env, "CANOPY_STORE_HOSTED") &&
      !env_value(env, "CANOPY_MASTER_PORT") && !is_etcd_address(env_value(env, "CANOPY_MASTER_ADDR").value_or("")))
    fail(ErrorCode::Config,
         "TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts a PyTorch TCPStore at MASTER_PORT, which "
         "Canopy cannot use; set CANOPY_MASTER_PORT to a free port (rank 0 then hosts Canopy's store there) "
         "or "
         "CANOPY_STORE_FILE to a shared directory, or CANOPY_MASTER_ADDR to an etcd store (etcd://host:2379/PREFIX)");

  find_store_address(env, info);

  info.job_token = derive_job_token(env, info.source);
  const char* restart_variable =
      env_value(env, "CANOPY_RESTART_COUNT") ? "CANOPY_RESTART_COUNT" : "TORCHELASTIC_RESTART_COUNT";
  if (auto restarts = non_negative(env, restart_variable)) info.restart_count = static_cast<int>(*restarts);
  if (auto range = env_value(env, "CANOPY_ELASTIC"))
    info.elastic = parse_elastic_range("CANOPY_ELASTIC", *range);
  info.elastic_join = parse_flag(env, "CANOPY_ELASTIC_JOIN");
  if (info.elastic_join && !info.elastic)
    fail(ErrorCode::Config,
         "CANOPY_ELASTIC_JOIN=1 needs CANOPY_ELASTIC=MIN:MAX beside it: a replacement joins an elastic job's "
         "group, which canopy-run --elastic starts");
  return info;
}

}  // namespace canopy::rendezvous
