#include "common/error.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

VerbsOptions VerbsOptions::from_environment(const EnvMap& env) {
  VerbsOptions options;
  options.hca = env_value(env, "CANOPY_IB_HCA").value_or("");
  auto gid = env_integer(env, "CANOPY_IB_GID_INDEX").value_or(-1);
  if (gid < -1 || gid > 255)
    fail(ErrorCode::Config, "CANOPY_IB_GID_INDEX={} must be a GID table index from 0 to 255 (or unset)", gid);
  options.gid_index = static_cast<int>(gid);
  auto spin = env_integer(env, "CANOPY_IB_SPIN_US").value_or(20);
  if (spin < 0 || spin > 1'000'000)
    fail(ErrorCode::Config, "CANOPY_IB_SPIN_US={} must be between 0 and 1000000 microseconds", spin);
  options.spin = std::chrono::microseconds(spin);
  auto chunk = env_integer(env, "CANOPY_IB_CHUNK_BYTES").value_or(0);
  if (chunk != 0 && (chunk < 4096 || chunk > (1LL << 31)))
    fail(ErrorCode::Config, "CANOPY_IB_CHUNK_BYTES={} must be 0 (the device maximum) or from 4096 to 2^31",
         chunk);
  options.max_chunk_bytes = static_cast<std::size_t>(chunk);
  auto cache = env_integer(env, "CANOPY_IB_REG_CACHE").value_or(0);
  if (cache != 0 && cache != 1) fail(ErrorCode::Config, "CANOPY_IB_REG_CACHE={} must be 0 or 1", cache);
  options.keep_registrations = cache == 1;
  options.connect_timeout = default_timeout();
  return options;
}

}  // namespace canopy::transport
