#include "collectives/schedules/simulated_hosts.hpp"

#include <algorithm>
#include <utility>

#include "common/error.hpp"

namespace canopy::collectives {

SimulatedHosts::SimulatedHosts(const HostLayout& layout, int ranks, const std::string& context)
    : layout_(layout) {
  if (layout.host_of_rank.empty()) return;
  if (layout.host_of_rank.size() != static_cast<std::size_t>(ranks))
    fail(ErrorCode::InvalidArgument, "{}: the host layout names {} ranks", context,
         layout.host_of_rank.size());
  for (int host : layout.host_of_rank) {
    if (host < 0 || static_cast<std::size_t>(host) >= layout.cores_of_host.size() ||
        layout.cores_of(host) < 1)
      fail(ErrorCode::InvalidArgument, "{}: host {} of the layout has no core count", context, host);
  }
  hosts_.resize(layout.cores_of_host.size());
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    if (layout.shares_cores(static_cast<int>(h)))
      hosts_[h].core_free.assign(static_cast<std::size_t>(layout.cores_of(static_cast<int>(h))), 0.0);
  }
}

CoreClaim SimulatedHosts::soonest_free_cores(Host& host, int wanted) {
  CoreClaim claim;
  for (double& core : host.core_free) {
    // Keep the `wanted` (at most two) soonest free: insert in order, dropping the latest.
    double* candidate = &core;
    for (int i = 0; i < wanted && candidate != nullptr; ++i) {
      if (i == claim.count) {
        claim.cores[claim.count++] = candidate;
        candidate = nullptr;
      } else if (*candidate < *claim.cores[i]) {
        std::swap(candidate, claim.cores[i]);
      }
    }
  }
  return claim;
}

CoreClaim SimulatedHosts::cores_for_message(int from, int to) {
  if (hosts_.empty() || !same_host(from, to)) return {};
  return soonest_free_cores(host_of(from), layout_.cores_per_message(layout_.host_of(from)));
}

bool SimulatedHosts::host_cores_busy(int rank, double now) const {
  if (hosts_.empty()) return false;
  const auto& cores = host_of(rank).core_free;
  return !cores.empty() && std::all_of(cores.begin(), cores.end(), [now](double free) { return free > now; });
}

double* SimulatedHosts::core_for_compute(int rank) {
  if (hosts_.empty()) return nullptr;
  const CoreClaim claim = soonest_free_cores(host_of(rank), 1);
  return claim.count == 0 ? nullptr : claim.cores[0];
}

void SimulatedHosts::add_core_work(int rank, double seconds) {
  if (!hosts_.empty()) host_of(rank).core_work += seconds;
}

double SimulatedHosts::network_free(int from, int to) const {
  if (hosts_.empty() || same_host(from, to)) return 0;
  return std::max(host_of(from).out_free, host_of(to).in_free);
}

double SimulatedHosts::occupy_network(int from, int to, double start, double seconds) {
  if (hosts_.empty() || same_host(from, to)) return start;
  Host& sender = host_of(from);
  Host& receiver = host_of(to);
  sender.out_free = receiver.in_free = start + seconds;
  sender.out_work += seconds;
  receiver.in_work += seconds;
  return start + seconds;
}

double SimulatedHosts::pace() const {
  double pace = 0;
  for (const Host& host : hosts_) {
    if (!host.core_free.empty())
      pace = std::max(pace, host.core_work / static_cast<double>(host.core_free.size()));
    pace = std::max({pace, host.out_work, host.in_work});
  }
  return pace;
}

}  // namespace canopy::collectives
