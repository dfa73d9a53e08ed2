// What the ranks of one host share in the simulator (simulator.cpp): its cores, where its ranks
// outnumber them, and its link to the network, which every message between hosts takes at both ends.
#pragma once

#include <string>
#include <vector>

#include "collectives/schedules/host_layout.hpp"

namespace canopy::collectives {

// The cores one message (at most two: HostLayout::cores_per_message) or reduction takes, the one free
// soonest first; none where the host's ranks fit its cores.
struct CoreClaim {
  double* cores[2] = {nullptr, nullptr};
  int count = 0;
};

class SimulatedHosts {
 public:
  // Error(InvalidArgument), prefixed by `context`, for a layout that does not fit `ranks` ranks.
  SimulatedHosts(const HostLayout& layout, int ranks, const std::string& context);

  bool same_host(int a, int b) const { return layout_.host_of(a) == layout_.host_of(b); }

  // The cores a message between `from` and `to` needs when they share a host that shares its cores:
  // those free soonest.
  CoreClaim cores_for_message(int from, int to);
  // Whether every shared core of `rank`'s host is busy past `now`: then no message within that host can
  // start now (cores_for_message would find none free).
  bool host_cores_busy(int rank, double now) const;
  // The core a reduction (or copy) on `rank` needs where its host shares its cores; null otherwise.
  double* core_for_compute(int rank);
  // Counts `seconds` of work on the shared cores of `rank`'s host (for pace()).
  void add_core_work(int rank, double seconds);

  // When the network links a message from `from` to `to` takes (the sending host's outgoing one and
  // the receiving host's incoming one) are both free; 0 for a message within a host, or without a
  // layout (each rank's own link is then its host's).
  double network_free(int from, int to) const;
  // Holds both links for `seconds` from `start` on: the message's bytes. Its alpha is flight and
  // wake-ups, which leave the wire to the host's other ranks. Returns when the links free up.
  double occupy_network(int from, int to, double start, double seconds);

  // The busiest host's pace per call in a stream: its shared cores' work divided among them, or the
  // bytes through its network link in either direction.
  double pace() const;

 private:
  struct Host {
    std::vector<double> core_free;  // empty where its ranks fit its cores
    double core_work = 0;
    double out_free = 0, in_free = 0;  // its network link, each way
    double out_work = 0, in_work = 0;
  };
  Host& host_of(int rank) { return hosts_[static_cast<std::size_t>(layout_.host_of(rank))]; }
  const Host& host_of(int rank) const { return hosts_[static_cast<std::size_t>(layout_.host_of(rank))]; }
  CoreClaim soonest_free_cores(Host& host, int wanted);

  HostLayout layout_;
  std::vector<Host> hosts_;  // empty without a layout
};

}  // namespace canopy::collectives
