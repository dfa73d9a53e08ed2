// Building a schedule allocates; a training loop calls the same collectives with the same sizes
// every step, so compiled schedules are kept and reused (steady state allocates nothing). A call through
// the host's cells has its plan kept the same way, so that every call reaches the executor alike.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <vector>

#include "collectives/executor.hpp"
#include "collectives/schedules/algorithms.hpp"

namespace canopy::collectives {

class ScheduleCache {
 public:
  explicit ScheduleCache(std::size_t capacity = 64) : capacity_(capacity) {}

  // `route`: Route::Cells for a one-shot algorithm's call that fits the host's cells.
  const CompiledSchedule& get(const Algorithm& algorithm, const CollectiveCall& call,
                              Route route = Route::Messages) {
    // Most calls repeat the one before: that entry is compared with the call field by field, without building
    // a key (which copies the counts and the layout pointer). It is the most recently used already.
    if (last_ != nullptr && describes(last_->first, algorithm, call, route)) return *last_->second.schedule;
    return find_or_build(algorithm, call, route);
  }

 private:
  // The map and the least-recently-used order, for a call unlike the one before (schedule_cache.cpp).
  const CompiledSchedule& find_or_build(const Algorithm& algorithm, const CollectiveCall& call, Route route);

  // all_to_all_v's counts shape its schedule as much as count does every other's (empty elsewhere). The
  // layout is keyed by identity: a communicator's calls share one, and the key keeps it alive, so another
  // layout can never take its address while a schedule built for it is kept.
  struct Key {
    const Algorithm* algorithm;
    int rank;
    int size;
    std::uint64_t count;
    int root;
    std::uint64_t chunk_count;
    bool in_place;
    std::vector<std::uint64_t> send_counts;
    std::vector<std::uint64_t> recv_counts;
    std::shared_ptr<const HostLayout> hosts;
    Route route;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    std::unique_ptr<CompiledSchedule> schedule;
    std::list<Key>::iterator position;
  };

  static bool describes(const Key& key, const Algorithm& algorithm, const CollectiveCall& call, Route route) {
    return key.route == route && key.algorithm == &algorithm && key.rank == call.rank && key.size == call.size &&
           key.count == call.count && key.root == call.root && key.chunk_count == call.chunk_count &&
           key.in_place == call.in_place && std::ranges::equal(key.send_counts, call.send_counts) &&
           std::ranges::equal(key.recv_counts, call.recv_counts) && key.hosts == call.hosts;
  }

  std::size_t capacity_;
  std::map<Key, Entry> entries_;
  std::list<Key> recent_;  // most recently used first
  std::map<Key, Entry>::value_type* last_ = nullptr;  // the entry the last get() returned
};

}  // namespace canopy::collectives
