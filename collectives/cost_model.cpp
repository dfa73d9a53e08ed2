#include "collectives/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"

namespace canopy::collectives {

namespace {

// Predictions closer than this are a tie: the model is not that exact.
constexpr double kTie = 0.05;

// Faster by more than a tie; or tied, made mostly of per-message costs, and sending fewer messages: every
// message costs the CPU of both its ends (docs/SCHEDULES.md, *Ties*).
bool beats(const Prediction& candidate, double best_seconds, std::size_t best_messages, double alpha) {
  if (candidate.seconds < best_seconds * (1 - kTie)) return true;
  if (candidate.seconds > best_seconds * (1 + kTie)) return false;
  const bool latency_bound =
      static_cast<double>(std::min(candidate.messages, best_messages)) * alpha >= 0.5 * best_seconds;
  return latency_bound ? candidate.messages < best_messages : candidate.seconds < best_seconds;
}

// In a stream: a faster pace by more than a tie wins; tied, what wins one call (a stream's first and
// last calls still wait for their latency).
bool beats_in_stream(const Prediction& candidate, const Prediction& best, double alpha) {
  if (candidate.stream_seconds < best.stream_seconds * (1 - kTie)) return true;
  if (candidate.stream_seconds > best.stream_seconds * (1 + kTie)) return false;
  return beats(candidate, best.seconds, best.messages, alpha);
}

}  // namespace

const AlgorithmChoice& CostModel::choose(const CollectiveCall& call, std::size_t element_size, Pace pace) {
  Key key{call.collective, call.count, call.root, call.chunk_count, element_size, pace};
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;

  const bool stream = pace == Pace::Stream;
  const std::span<const Algorithm> candidates = algorithms(call.collective);
  if (candidates.size() == 1) {
    // Nothing to choose; all-to-all-v could not be timed anyway: a rank knows only its own counts.
    AlgorithmChoice only{&candidates[0], 0,
                         fmt::format("{} on {} ranks: {} (the only algorithm)", to_string(call.collective),
                                     call.size, candidates[0].name)};
    if (choices_.size() >= kMaxCached) choices_.clear();
    return choices_.emplace(key, std::move(only)).first->second;
  }
  AlgorithmChoice best;
  Prediction best_prediction;
  std::string explanation;
  for (const Algorithm& candidate : candidates) {
    const Prediction prediction = predict(candidate, call, element_size, link_);
    explanation += fmt::format("{}{} {:.1f} us", explanation.empty() ? "" : ", ", candidate.name,
                               (stream ? prediction.stream_seconds : prediction.seconds) * 1e6);
    const bool better =
        best.algorithm == nullptr ||
        (stream ? beats_in_stream(prediction, best_prediction, link_.alpha)
                : beats(prediction, best_prediction.seconds, best_prediction.messages, link_.alpha));
    if (better) {
      best.algorithm = &candidate;
      best_prediction = prediction;
    }
  }
  best.predicted_seconds = stream ? best_prediction.stream_seconds : best_prediction.seconds;
  if (best.algorithm == nullptr)
    fail(ErrorCode::InvalidArgument, "no algorithm implements {}", to_string(call.collective));
  best.explanation =
      fmt::format("{} of {} x {} B on {} ranks{}: chose {} (predicted{}: {})", to_string(call.collective),
                  call.count, element_size, call.size, stream ? ", in a stream" : "", best.algorithm->name,
                  stream ? " per call" : "", explanation);
  if (choices_.size() >= kMaxCached) choices_.clear();
  return choices_.emplace(key, std::move(best)).first->second;
}

}  // namespace canopy::collectives
