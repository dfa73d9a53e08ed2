#include "collectives/cost_model.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.hpp"

namespace canopy::collectives {

const AlgorithmChoice& CostModel::choose(const CollectiveCall& call, std::size_t element_size) {
  Key key{call.collective, call.count, call.root, call.chunk_count, element_size};
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;

  AlgorithmChoice best;
  std::string explanation;
  for (const Algorithm& candidate : algorithms(call.collective)) {
    double seconds = predict_seconds(candidate, call, element_size, link_);
    explanation += fmt::format("{}{} {:.1f} us", explanation.empty() ? "" : ", ", candidate.name, seconds * 1e6);
    if (best.algorithm == nullptr || seconds < best.predicted_seconds) {
      best.algorithm = &candidate;
      best.predicted_seconds = seconds;
    }
  }
  if (best.algorithm == nullptr)
    fail(ErrorCode::InvalidArgument, "no algorithm implements {}", to_string(call.collective));
  best.explanation = fmt::format("{} of {} x {} B on {} ranks: chose {} (predicted: {})", to_string(call.collective),
                                 call.count, element_size, call.size, best.algorithm->name, explanation);
  if (choices_.size() >= kMaxCached) choices_.clear();
  return choices_.emplace(key, std::move(best)).first->second;
}

}  // namespace canopy::collectives
