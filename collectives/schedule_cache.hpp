// Building a schedule allocates; a training loop calls the same collectives with the same sizes
// every step, so compiled schedules are kept and reused (steady state allocates nothing).
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "collectives/executor.hpp"
#include "collectives/schedules/algorithms.hpp"

namespace canopy::collectives {

class ScheduleCache {
 public:
  explicit ScheduleCache(std::size_t capacity = 64) : capacity_(capacity) {}

  const CompiledSchedule& get(const Algorithm& algorithm, const CollectiveCall& call) {
    // all_to_all_v's counts shape its schedule as much as count does every other's (empty elsewhere).
    Key key{&algorithm,       call.rank,     call.size,        call.count,       call.root,
            call.chunk_count, call.in_place, call.send_counts, call.recv_counts, call.hosts};
    if (auto it = entries_.find(key); it != entries_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second.position);
      return *it->second.schedule;
    }
    if (entries_.size() >= capacity_) {
      entries_.erase(recent_.back());
      recent_.pop_back();
    }
    recent_.push_front(key);
    auto compiled = std::make_unique<CompiledSchedule>(algorithm.build(call), call.size);
    auto& entry = entries_[key] = Entry{std::move(compiled), recent_.begin()};
    return *entry.schedule;
  }

 private:
  // The layout by identity: a communicator's calls share one, and the key keeps it alive, so another
  // layout can never take its address while a schedule built for it is kept.
  using Key =
      std::tuple<const Algorithm*, int, int, std::uint64_t, int, std::uint64_t, bool,
                 std::vector<std::uint64_t>, std::vector<std::uint64_t>, std::shared_ptr<const HostLayout>>;
  struct Entry {
    std::unique_ptr<CompiledSchedule> schedule;
    std::list<Key>::iterator position;
  };
  std::size_t capacity_;
  std::map<Key, Entry> entries_;
  std::list<Key> recent_;  // most recently used first
};

}  // namespace canopy::collectives
