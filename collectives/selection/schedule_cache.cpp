#include "collectives/selection/schedule_cache.hpp"

namespace canopy::collectives {

namespace {

std::unique_ptr<CompiledSchedule> compile(const Algorithm& algorithm, const CollectiveCall& call, Route route) {
  if (route == Route::Cells)
    return std::make_unique<CompiledSchedule>(
        CellsCall{call.collective, call.rank, call.size, call.root, call.count});
  return std::make_unique<CompiledSchedule>(algorithm.build(call), call.size);
}

}  // namespace

const CompiledSchedule& ScheduleCache::find_or_build(const Algorithm& algorithm, const CollectiveCall& call,
                                                     Route route) {
  Key key{&algorithm,       call.rank,     call.size,        call.count,       call.root,       call.chunk_count,
          call.in_place,    call.send_counts, call.recv_counts, call.hosts,  route};
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.position);
  } else {
    auto compiled = compile(algorithm, call, route);
    if (entries_.size() >= capacity_) {
      const auto oldest = entries_.find(recent_.back());
      if (&*oldest == last_) last_ = nullptr;
      entries_.erase(oldest);
      recent_.pop_back();
    }
    recent_.push_front(key);
    it = entries_.emplace(std::move(key), Entry{std::move(compiled), recent_.begin()}).first;
  }
  last_ = &*it;
  return *it->second.schedule;
}

}  // namespace canopy::collectives
