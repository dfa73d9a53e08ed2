// Choosing an algorithm per call: every candidate's schedule is timed by the simulator under the
// alpha-beta-gamma model measured on this group at start-up, and the fastest wins. Every rank holds
// the same model (rank 0 measures it and shares it through the store), so every rank makes the same
// choice without talking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "collectives/selection/choice_memo.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"

namespace canopy::collectives {

// What a choice optimises: one call's latency, or the time per call in a stream of calls back to back
// (where a pipelined chain that is slow for one call keeps every rank busy with one message per call).
enum class Pace : std::uint8_t { OneCall, Stream };

struct AlgorithmChoice {
  const Algorithm* algorithm = nullptr;
  double predicted_seconds = 0;  // per call, at the pace asked for
  std::string explanation;       // every candidate's predicted time, for CANOPY_DEBUG=INFO
};

class CostModel {
 public:
  // With a memo, a choice another rank of this host has made is read instead of simulated again.
  explicit CostModel(LinkModel link = {}, std::shared_ptr<ChoiceMemo> memo = nullptr)
      : link_(std::move(link)), memo_(std::move(memo)) {}

  const LinkModel& link() const { return link_; }
  // The reference stays valid until the next call: a steady-state call copies nothing.
  const AlgorithmChoice& choose(const CollectiveCall& call, std::size_t element_size,
                                Pace pace = Pace::OneCall) {
    const Key key{call.collective, call.count, call.root, call.chunk_count, element_size, pace};
    const Last& last = last_[pace == Pace::Stream ? 1 : 0];
    if (last.choice != nullptr && last.key == key) return *last.choice;
    return look_up(key, call, element_size, pace);
  }
  // The same choice, computed afresh and remembered nowhere: safe beside a call on another thread.
  AlgorithmChoice evaluate(const CollectiveCall& call, std::size_t element_size, Pace pace) const;

 private:
  using Key = std::tuple<Collective, std::uint64_t, int, std::uint64_t, std::size_t, Pace>;
  const AlgorithmChoice& look_up(const Key& key, const CollectiveCall& call, std::size_t element_size,
                                 Pace pace);
  // evaluate(), through the memo.
  AlgorithmChoice recall(const CollectiveCall& call, std::size_t element_size, Pace pace) const;

  LinkModel link_;
  std::shared_ptr<ChoiceMemo> memo_;
  std::map<Key, AlgorithmChoice> choices_;  // bounded: cleared when it grows past kMaxCached
  static constexpr std::size_t kMaxCached = 512;
  // The last choice of each pace, looked at before the map: a loop asks for the same one call after call,
  // and a broadcast in a stream asks for both paces (the stream's, and one call's to tell a stream).
  struct Last {
    Key key;
    const AlgorithmChoice* choice = nullptr;  // into choices_
  };
  Last last_[2];
};

}  // namespace canopy::collectives
