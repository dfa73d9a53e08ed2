#include "rendezvous/store_address.hpp"

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "rendezvous/etcd_address.hpp"
#include "rendezvous/pmix_exchange.hpp"
#include "rendezvous/printable.hpp"
#include "rendezvous/slurm_hostlist.hpp"

namespace canopy::rendezvous {
namespace {

constexpr std::uint16_t kDefaultPort = 29500;

// The first of `names` that is set, or nullptr.
const char* first_set(const EnvMap& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (env_value(env, name)) return name;
  }
  return nullptr;
}

// An unsigned decimal launcher value (a job or step id, a port); Error(Config) naming it otherwise.
std::uint64_t unsigned_value(const EnvMap& env, const char* name) {
  const std::string text = env_value(env, name).value_or("");
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail(ErrorCode::Config, "{}={} is not an unsigned integer", name, printable(text));
  return value;
}

std::uint16_t checked_port(std::uint64_t value, const char* name) {
  if (value < 1 || value > 65535) fail(ErrorCode::Config, "{}={} is not a TCP port (1-65535)", name, value);
  return static_cast<std::uint16_t>(value);
}

// FNV-1a: a job id that is text (Open MPI's) as a number to derive a port from.
std::uint64_t text_hash(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

struct GivenPort {
  std::optional<std::uint16_t> port;
  const char* variable = nullptr;
};

GivenPort given_port(const EnvMap& env) {
  GivenPort given;
  given.variable = first_set(env, {"CANOPY_MASTER_PORT", "MASTER_PORT"});
  if (given.variable) {
    auto value = env_integer(env, given.variable);
    if (*value < 1 || *value > 65535)
      fail(ErrorCode::Config, "{}={} is not a TCP port (1-65535)", given.variable, *value);
    given.port = static_cast<std::uint16_t>(*value);
  }
  return given;
}

std::string range_text(PortRange range) {
  return fmt::format("{}-{}", range.low, range.high);
}

// srun: rank 0 runs on the step's first node (block and cyclic distributions both start there).
void find_under_slurm(const EnvMap& env, const GivenPort& given, LaunchInfo& info) {
  const char* list_variable = first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
  if (!list_variable)
    fail(ErrorCode::Config,
         "rank {} of {} (slurm launch): no store address and no node list to take it from (neither "
         "SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set); set CANOPY_MASTER_ADDR or MASTER_ADDR to the "
         "host of rank 0",
         info.rank, info.world_size);
  info.store_host = first_host_of_hostlist(*env_value(env, list_variable), list_variable);
  auto node = env_value(env, "SLURMD_NODENAME");
  if (info.rank == 0 && node && *node != info.store_host)
    fail(
        ErrorCode::Config,
        "rank 0 runs on SLURMD_NODENAME={}, not on {}, the first host of {}, where the other ranks will look "
        "for its store (a task distribution that does not start on the first node?); set "
        "CANOPY_MASTER_ADDR or MASTER_ADDR to rank 0's host",
        printable(*node), printable(info.store_host), list_variable);
  std::string port_origin;
  if (given.port) {
    info.store_port = *given.port;
    port_origin = given.variable;
  } else if (auto reserved = env_value(env, "SLURM_STEP_RESV_PORTS")) {
    // Ports SLURM reserved for this step on every node (MpiParams=ports=, srun --resv-ports): "12000-12003".
    std::uint64_t first = 0;
    auto [end, ec] = std::from_chars(reserved->data(), reserved->data() + reserved->size(), first);
    if (ec != std::errc() || (end != reserved->data() + reserved->size() && *end != '-' && *end != ','))
      fail(ErrorCode::Config, "SLURM_STEP_RESV_PORTS={} is not a port range like 12000-12003",
           printable(*reserved));
    info.store_port = checked_port(first, "SLURM_STEP_RESV_PORTS");
    port_origin = "the first of SLURM_STEP_RESV_PORTS";
  } else {
    if (!env_value(env, "SLURM_JOB_ID"))
      fail(ErrorCode::Config,
           "rank {} of {} (slurm launch): SLURM_JOB_ID is not set, so no store port can be derived; set "
           "CANOPY_MASTER_PORT",
           info.rank, info.world_size);
    const std::uint64_t job = unsigned_value(env, "SLURM_JOB_ID");
    const char* step_variable = first_set(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
    const std::uint64_t step = step_variable ? unsigned_value(env, step_variable) : 0;
    const PortRange range = store_port_range(env);
    info.store_port = derived_store_port(range, job, step);
    port_origin = fmt::format("derived from SLURM_JOB_ID={} and {}={} in {}", job,
                              step_variable ? step_variable : "SLURM_STEP_ID", step, range_text(range));
  }
  info.store_origin = fmt::format("the first host of {}, port {}", list_variable, port_origin);
}

// mpirun: loopback when every rank is on this host, else rank 0 shares its address through PMIx.
void find_under_openmpi(const EnvMap& env, const GivenPort& given, LaunchInfo& info) {
  if (info.local_world_size == info.world_size) {
    info.store_host = "127.0.0.1";
    if (given.port) {
      info.store_port = *given.port;
      info.store_origin = fmt::format("loopback (every rank on this host), port {}", given.variable);
      return;
    }
    const char* job_variable = first_set(env, {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"});
    if (!job_variable)
      fail(ErrorCode::Config,
           "rank {} of {} (openmpi launch): neither OMPI_MCA_ess_base_jobid nor PMIX_NAMESPACE is set, so no "
           "store port can be derived; set CANOPY_MASTER_PORT",
           info.rank, info.world_size);
    const std::string job = *env_value(env, job_variable);
    const PortRange range = store_port_range(env);
    info.store_port = derived_store_port(range, text_hash(job), 0);
    info.store_origin = fmt::format("loopback (every rank on this host), port derived from {}={} in {}",
                                    job_variable, printable(job), range_text(range));
    return;
  }
  if (!pmix_built())
    fail(ErrorCode::Config,
         "rank {} of {} (openmpi launch): the ranks are on several hosts (OMPI_COMM_WORLD_LOCAL_SIZE={} of "
         "OMPI_COMM_WORLD_SIZE={}) and this build of Canopy has no PMIx (libpmix-dev) to find rank 0's store "
         "through; set CANOPY_MASTER_ADDR or MASTER_ADDR to rank 0's host, or rebuild with libpmix-dev",
         info.rank, info.world_size, info.local_world_size, info.world_size);
  info.store_through_pmix = true;
  info.store_port = given.port.value_or(0);  // 0: rank 0 takes a free port and shares it
  info.store_origin = "shared by rank 0 through PMIx";
}

}  // namespace

PortRange store_port_range(const EnvMap& env) {
  PortRange range;
  auto text = env_value(env, "CANOPY_STORE_PORT_RANGE");
  if (!text) return range;
  unsigned low = 0, high = 0;
  const char* begin = text->data();
  const char* end = begin + text->size();
  auto [dash, ec] = std::from_chars(begin, end, low);
  bool ok = ec == std::errc() && dash != end && *dash == '-';
  if (ok) {
    auto [last, ec2] = std::from_chars(dash + 1, end, high);
    ok = ec2 == std::errc() && last == end && low >= 1 && low <= high && high <= 65535;
  }
  if (!ok)
    fail(ErrorCode::Config, "CANOPY_STORE_PORT_RANGE={} is not a port range low-high within 1-65535",
         printable(*text));
  range.low = static_cast<std::uint16_t>(low);
  range.high = static_cast<std::uint16_t>(high);
  return range;
}

std::uint16_t derived_store_port(PortRange range, std::uint64_t job, std::uint64_t step) {
  const std::uint64_t span = static_cast<std::uint64_t>(range.high) - range.low + 1;
  const std::uint64_t scattered = (job * 2654435761ull) & 0xffffffffull;  // Knuth's multiplicative hash
  return static_cast<std::uint16_t>(range.low + (scattered % span + step % span) % span);
}

void find_store_address(const EnvMap& env, LaunchInfo& info) {
  const GivenPort given = given_port(env);
  if (const char* host_variable = first_set(env, {"CANOPY_MASTER_ADDR", "MASTER_ADDR"})) {
    if (auto address = *env_value(env, host_variable); is_etcd_address(address)) {
      parse_etcd_address(address);  // a malformed address is an error here, before any rank waits on it
      info.store_etcd = address;
      info.store_origin = host_variable;
      return;
    }
    info.store_host = *env_value(env, host_variable);
    info.store_port = given.port.value_or(kDefaultPort);
    info.store_origin = given.port ? fmt::format("{} and {}", host_variable, given.variable)
                                   : fmt::format("{}, port {} by default", host_variable, kDefaultPort);
    return;
  }
  info.store_port = given.port.value_or(kDefaultPort);
  const bool needs_address = info.store_file.empty() && (info.world_size > 1 || info.store_hosted_externally);
  if (!needs_address) return;
  if (!info.store_hosted_externally && info.source == "slurm") return find_under_slurm(env, given, info);
  if (!info.store_hosted_externally && info.source == "openmpi") return find_under_openmpi(env, given, info);
  fail(ErrorCode::Config,
       "rank {} of {} ({} launch): no store address; set CANOPY_MASTER_ADDR or MASTER_ADDR to the host of "
       "rank 0, or CANOPY_STORE_FILE to a shared directory (under srun or mpirun none is needed)",
       info.rank, info.world_size, info.source);
}

}  // namespace canopy::rendezvous
