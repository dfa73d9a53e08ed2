#include "transport/shm/shm_options.hpp"

#include <algorithm>
#include <mutex>

#include "common/error.hpp"
#include "transport/shm/shm_ring.hpp"

namespace canopy::transport {
namespace {

std::mutex budget_mutex;  // both accounts, and the share they take part of
int most_host_ranks = 1;

}  // namespace

ShmOptions ShmOptions::from(const MeshOptions& mesh) {
  const ShmSettings& settings = mesh.settings.shm;
  ShmOptions options;
  take_mesh_facts(mesh, options);
  options.job_token = mesh.job_token;
  options.host_of_rank = mesh.host_of_rank;
  options.unix_listener_book = mesh.unix_listener_book;
  options.unix_listener_book_mesh = mesh.unix_listener_book_mesh;
  options.links_on_first_use = mesh.store_for_first_use != nullptr;
  options.ring_bytes = settings.ring_bytes;
  options.slot_bytes = settings.slot_bytes;
  options.single_copy_bytes = settings.single_copy_bytes;
  options.host_budget_bytes = settings.host_budget_bytes;
  options.cell_bytes = mesh.host_cells ? settings.cell_bytes : 0;
  if (settings.spin) options.spin = *settings.spin;
  if (!mesh.spin) options.spin = std::chrono::microseconds(0);
  return options;
}

bool suits_single_copy(Collective collective, std::uint64_t bytes, std::uint64_t single_copy_bytes) {
  const bool reduced = collective == Collective::AllReduce || collective == Collective::Reduce ||
                       collective == Collective::ReduceScatter;
  return single_copy_bytes > 0 && bytes >= single_copy_bytes && !reduced;
}

ShmBudget ShmBudget::rings{1};
ShmBudget ShmBudget::cells{8};

bool ShmBudget::reserve(std::uint64_t bytes, std::uint64_t host_budget, int host_ranks) {
  std::lock_guard lock(budget_mutex);
  most_host_ranks = std::max(most_host_ranks, host_ranks);
  if (held_ + bytes > host_budget / static_cast<std::uint64_t>(most_host_ranks) / part_) return false;
  held_ += bytes;
  return true;
}

void ShmBudget::release(std::uint64_t bytes) {
  std::lock_guard lock(budget_mutex);
  held_ -= std::min(bytes, held_);
}

std::uint64_t ShmBudget::held() const {
  std::lock_guard lock(budget_mutex);
  return held_;
}

}  // namespace canopy::transport
