// Two levels: one among the ranks of each host, one between hosts. Where links between hosts are the
// slow ones, the level between hosts is what costs, and it carries less than a flat algorithm sends
// across: a host-ordered ring all-reduce pushes 2(P-1)/P n through each host's link, the two-level one
// 2(H-1)/H n (H hosts), and its L ranks per host share that out as L streams. Any layout works, uneven
// hosts included (HostGroups); with one host, or one rank per host, each algorithm is its flat
// counterpart. Every element is still reduced along one path and copied elsewhere: bit-identical on
// every rank.
#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/host_groups.hpp"

namespace canopy::collectives {
namespace {

// The all-reduce's slices: as many as the largest host has ranks. Local rank i of a host with L ranks
// owns slices [first(i), first(i + 1)), first(i) = floor(i S / L): one each on the largest hosts,
// several on smaller ones, always a contiguous block of the buffer.
struct Slicing {
  int slices = 1;

  int first(int local, int ranks_on_host) const { return local * slices / ranks_on_host; }
  int owner(int slice, int ranks_on_host) const {
    int local = 0;
    while (first(local + 1, ranks_on_host) <= slice) ++local;
    return local;
  }
};

// The rank that speaks for `host` between hosts: the root on its own host, else the host's lowest rank.
int leader_of(const HostGroups& groups, int host, int root) {
  return groups.host_of(root) == host ? root : groups.members(host).front();
}

std::vector<int> leaders(const HostGroups& groups, int root) {
  std::vector<int> ranks;
  for (int host = 0; host < groups.hosts(); ++host) ranks.push_back(leader_of(groups, host, root));
  return ranks;
}

}  // namespace

// Reduce-scatter inside each host (each local rank ends with its host's sum of its slices), then for
// every slice ring all-reduces among the ranks that own it, one on each host, then all-gather inside
// each host. Deps come from memory, so a slice's piece goes across as soon as the host has reduced it.
// Between hosts each host moves 2(H-1)/H n, against 2(P-1)/P n for the flat ring.
Schedule all_reduce_two_level(const CollectiveCall& call) {
  StepWriter writer(call);
  const HostGroups& groups = HostGroups::of(call);
  const int host = groups.host_of(call.rank);
  const std::vector<int>& mine = groups.members(host);
  const int local_ranks = static_cast<int>(mine.size());
  const Slicing slicing{groups.largest()};
  auto owner_on = [&](int h, int slice) {
    const std::vector<int>& members = groups.members(h);
    return members[static_cast<std::size_t>(slicing.owner(slice, static_cast<int>(members.size())))];
  };
  const PartOfPosition owned = [&](int local) {
    return parts_of(call.count, slicing.slices, slicing.first(local, local_ranks),
                    slicing.first(local + 1, local_ranks));
  };
  const RingOf inside = ring_through(mine, call.rank);
  write_ring_reduce_scatter(writer, inside, owned, 0, /*chunk_by_chunk=*/true);

  // Inside hosts and across, everything goes chunk by chunk (across, in pieces of a chunk per host,
  // their rounds a wavefront): a slice's first piece crosses as soon as the host has reduced its first
  // chunks, and is passed on inside the other hosts as soon as it is complete, so the links between
  // hosts, the slow ones, are busy from almost the start to almost the end.
  const int hosts = groups.hosts();
  const std::uint64_t piece = call.chunk_count * static_cast<std::uint64_t>(hosts);
  // Rounds numbered alike on every host: a slice's ring starts at the same round everywhere.
  const auto rounds_across = static_cast<std::uint32_t>(2 * (hosts - 1));
  std::uint32_t round = static_cast<std::uint32_t>(slicing.slices - 1);
  for (int slice = 0; slice < slicing.slices; ++slice, round += rounds_across) {
    if (owner_on(host, slice) != call.rank) continue;
    std::vector<int> owners;
    for (int h = 0; h < hosts; ++h) owners.push_back(owner_on(h, slice));
    write_ring_all_reduce(writer, ring_through(std::move(owners), call.rank),
                          part_of(call.count, slicing.slices, slice), round, piece);
  }
  write_ring_all_gather(writer, inside, owned, round, /*chunk_by_chunk=*/true);
  return std::move(writer).finish();
}

// A binomial tree among the hosts' leaders, then one inside each host from its leader, chunk by chunk:
// a leader forwards chunk c into its host while chunk c+1 still arrives. ceil(lg H) + ceil(lg L)
// rounds, and the data enters each host once.
Schedule broadcast_two_level(const CollectiveCall& call) {
  StepWriter writer(call);
  const HostGroups& groups = HostGroups::of(call);
  const int host = groups.host_of(call.rank);
  const int leader = leader_of(groups, host, call.root);
  if (call.rank == leader)
    write_binomial_broadcast(writer, leaders(groups, call.root), groups.host_of(call.root), 0);
  write_binomial_broadcast(writer, groups.members(host), groups.local_of(leader), 1);
  return std::move(writer).finish();
}

// The mirror image: a binomial reduce inside each host to its leader, then among the leaders to the
// root, chunk by chunk. Each host sends its sum across once.
Schedule reduce_two_level(const CollectiveCall& call) {
  StepWriter writer(call);
  const HostGroups& groups = HostGroups::of(call);
  const int host = groups.host_of(call.rank);
  const int leader = leader_of(groups, host, call.root);
  write_binomial_reduce(writer, groups.members(host), groups.local_of(leader), 0);
  if (call.rank == leader)
    write_binomial_reduce(writer, leaders(groups, call.root), groups.host_of(call.root), 1);
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
