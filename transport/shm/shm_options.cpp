#include "transport/shm/shm_options.hpp"

#include <algorithm>
#include <mutex>

#include "common/error.hpp"
#include "transport/shm/shm_ring.hpp"

namespace canopy::transport {
namespace {

std::mutex budget_mutex;
std::uint64_t bytes_held = 0;       // rings
std::uint64_t cell_bytes_held = 0;  // host cells
int most_host_ranks = 1;

// Reserves `bytes` of `held` against this process's share of the host's budget, over `part`.
bool reserve_within(std::uint64_t& held, std::uint64_t bytes, std::uint64_t host_budget, int host_ranks,
                    std::uint64_t part) {
  std::lock_guard lock(budget_mutex);
  most_host_ranks = std::max(most_host_ranks, host_ranks);
  if (held + bytes > host_budget / static_cast<std::uint64_t>(most_host_ranks) / part) return false;
  held += bytes;
  return true;
}

void release_from(std::uint64_t& held, std::uint64_t bytes) {
  std::lock_guard lock(budget_mutex);
  held -= std::min(bytes, held);
}

std::uint64_t read_held(const std::uint64_t& held) {
  std::lock_guard lock(budget_mutex);
  return held;
}

}  // namespace

ShmOptions ShmOptions::from(const MeshOptions& mesh) {
  const Settings& settings = mesh.settings;
  ShmOptions options;
  take_mesh_facts(mesh, options);
  options.job_token = mesh.job_token;
  options.host_of_rank = mesh.host_of_rank;
  options.ring_bytes = settings.size("CANOPY_SHM_RING_BYTES");
  options.slot_bytes = settings.size("CANOPY_SHM_SLOT_BYTES");
  options.single_copy_bytes = settings.size("CANOPY_SHM_SINGLE_COPY_BYTES");
  options.host_budget_bytes = settings.size("CANOPY_SHM_BYTES");
  options.cell_bytes = mesh.host_cells ? settings.size("CANOPY_SHM_CELL_BYTES") : 0;
  if (settings.has("CANOPY_SHM_SPIN_US")) options.spin = settings.duration("CANOPY_SHM_SPIN_US");
  if (!mesh.spin) options.spin = std::chrono::microseconds(0);
  if ((options.ring_bytes & (options.ring_bytes - 1)) != 0)
    fail(ErrorCode::Config, "CANOPY_SHM_RING_BYTES={} must be a power of two", options.ring_bytes);
  if (options.slot_bytes % kRingLine != 0)
    fail(ErrorCode::Config, "CANOPY_SHM_SLOT_BYTES={} must be a multiple of {} bytes", options.slot_bytes,
         kRingLine);
  return options;
}

bool suits_single_copy(Collective collective, std::uint64_t bytes, std::uint64_t single_copy_bytes) {
  const bool reduced = collective == Collective::AllReduce || collective == Collective::Reduce ||
                       collective == Collective::ReduceScatter;
  return single_copy_bytes > 0 && bytes >= single_copy_bytes && !reduced;
}

bool ShmBudget::reserve(std::uint64_t bytes, std::uint64_t host_budget, int host_ranks) {
  return reserve_within(bytes_held, bytes, host_budget, host_ranks, 1);
}
void ShmBudget::release(std::uint64_t bytes) {
  release_from(bytes_held, bytes);
}
std::uint64_t ShmBudget::held() {
  return read_held(bytes_held);
}

bool ShmBudget::reserve_cells(std::uint64_t bytes, std::uint64_t host_budget, int host_ranks) {
  return reserve_within(cell_bytes_held, bytes, host_budget, host_ranks, 8);
}
void ShmBudget::release_cells(std::uint64_t bytes) {
  release_from(cell_bytes_held, bytes);
}
std::uint64_t ShmBudget::cells_held() {
  return read_held(cell_bytes_held);
}

}  // namespace canopy::transport
