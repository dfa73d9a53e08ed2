#include "collectives/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"

namespace canopy::collectives {

namespace {

// Predictions closer than this are a tie: the model is not that exact.
constexpr double kTie = 0.05;

// Faster by more than a tie; or tied, made mostly of per-message costs, and sending fewer messages: every
// message costs the CPU of both its ends, which the application and the other ranks of a host want too
// (on 4 ranks sharing 2 cores, the tree's 6 messages took 26 us where recursive doubling's 8, predicted as
// fast, took 30-36). Where bytes make the time, fewer (larger) messages are no better: the faster wins.
bool beats(const Prediction& candidate, double best_seconds, std::size_t best_messages, double alpha) {
  if (candidate.seconds < best_seconds * (1 - kTie)) return true;
  if (candidate.seconds > best_seconds * (1 + kTie)) return false;
  const bool latency_bound =
      static_cast<double>(std::min(candidate.messages, best_messages)) * alpha >= 0.5 * best_seconds;
  return latency_bound ? candidate.messages < best_messages : candidate.seconds < best_seconds;
}

}  // namespace

const AlgorithmChoice& CostModel::choose(const CollectiveCall& call, std::size_t element_size) {
  Key key{call.collective, call.count, call.root, call.chunk_count, element_size};
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;

  AlgorithmChoice best;
  std::size_t best_messages = 0;
  std::string explanation;
  for (const Algorithm& candidate : algorithms(call.collective)) {
    const Prediction prediction = predict(candidate, call, element_size, link_);
    explanation += fmt::format("{}{} {:.1f} us", explanation.empty() ? "" : ", ", candidate.name,
                               prediction.seconds * 1e6);
    if (best.algorithm == nullptr || beats(prediction, best.predicted_seconds, best_messages, link_.alpha)) {
      best.algorithm = &candidate;
      best.predicted_seconds = prediction.seconds;
      best_messages = prediction.messages;
    }
  }
  if (best.algorithm == nullptr)
    fail(ErrorCode::InvalidArgument, "no algorithm implements {}", to_string(call.collective));
  best.explanation =
      fmt::format("{} of {} x {} B on {} ranks: chose {} (predicted: {})", to_string(call.collective),
                  call.count, element_size, call.size, best.algorithm->name, explanation);
  if (choices_.size() >= kMaxCached) choices_.clear();
  return choices_.emplace(key, std::move(best)).first->second;
}

}  // namespace canopy::collectives
