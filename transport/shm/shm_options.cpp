#include "transport/shm/shm_options.hpp"

#include <algorithm>
#include <mutex>

#include "common/error.hpp"
#include "transport/shm/shm_ring.hpp"

namespace canopy::transport {
namespace {

std::uint64_t bytes_setting(const EnvMap& env, const char* name, std::uint64_t fallback, std::uint64_t low,
                            std::uint64_t high, bool power_of_two) {
  auto value = env_integer(env, name);
  if (!value) return fallback;
  const auto bytes = static_cast<std::uint64_t>(*value);
  if (*value < 0 || bytes < low || bytes > high || (power_of_two && (bytes & (bytes - 1)) != 0))
    fail(ErrorCode::Config, "{}={} must be {}bytes between {} and {}", name, *value,
         power_of_two ? "a power of two of " : "", low, high);
  return bytes;
}

std::mutex budget_mutex;
std::uint64_t bytes_held = 0;
int most_host_ranks = 1;

}  // namespace

ShmOptions ShmOptions::from_environment(const EnvMap& env) {
  ShmOptions options;
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  options.ring_bytes =
      bytes_setting(env, "CANOPY_SHM_RING_BYTES", options.ring_bytes, kRingMinBytes, kGiB, true);
  options.slot_bytes =
      bytes_setting(env, "CANOPY_SHM_SLOT_BYTES", options.slot_bytes, kRingLine, kGiB, false);
  if (options.slot_bytes % kRingLine != 0)
    fail(ErrorCode::Config, "CANOPY_SHM_SLOT_BYTES={} must be a multiple of {} bytes", options.slot_bytes,
         kRingLine);
  options.host_budget_bytes =
      bytes_setting(env, "CANOPY_SHM_BYTES", options.host_budget_bytes, 0, 1024 * kGiB, false);
  return options;
}

bool ShmBudget::reserve(std::uint64_t bytes, std::uint64_t host_budget, int host_ranks) {
  std::lock_guard lock(budget_mutex);
  most_host_ranks = std::max(most_host_ranks, host_ranks);
  const std::uint64_t share = host_budget / static_cast<std::uint64_t>(most_host_ranks);
  if (bytes_held + bytes > share) return false;
  bytes_held += bytes;
  return true;
}

void ShmBudget::release(std::uint64_t bytes) {
  std::lock_guard lock(budget_mutex);
  bytes_held -= std::min(bytes, bytes_held);
}

std::uint64_t ShmBudget::held() {
  std::lock_guard lock(budget_mutex);
  return bytes_held;
}

}  // namespace canopy::transport
