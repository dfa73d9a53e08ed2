#include "collectives/selection/cost_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

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

// "2 hosts x 4 ranks", "3 hosts of 4+2+2 ranks"; empty unless some host has several ranks and there are
// several hosts: only then does a two-level algorithm differ from a flat one.
std::string host_shape(const HostLayout& hosts) {
  std::vector<int> ranks;
  for (int host = 0; host < static_cast<int>(hosts.cores_of_host.size()); ++host)
    if (hosts.ranks_on(host) > 0) ranks.push_back(hosts.ranks_on(host));
  if (ranks.size() < 2 || *std::max_element(ranks.begin(), ranks.end()) < 2) return "";
  if (std::all_of(ranks.begin(), ranks.end(), [&](int n) { return n == ranks[0]; }))
    return fmt::format("{} hosts x {} ranks", ranks.size(), ranks[0]);
  return fmt::format("{} hosts of {} ranks", ranks.size(), fmt::join(ranks, "+"));
}

// Appends the bytes of trivially copyable values: the exact inputs of a choice, for ChoiceMemo.
class InputBytes {
 public:
  template <typename T>
  InputBytes& add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
    return *this;
  }
  template <typename T>
  InputBytes& add(const std::vector<T>& values) {
    add(values.size());
    for (const T& value : values) add(value);
    return *this;
  }
  InputBytes& add(const LinkCost& link) {
    return add(link.alpha)
        .add(link.beta)
        .add(link.beta_eager)
        .add(link.eager_bytes)
        .add(link.alpha_share_on_core);
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

// Everything evaluate() reads (the rank aside: a choice is the same on every rank).
std::string inputs_of(const LinkModel& link, const CollectiveCall& call, std::size_t element_size,
                      Pace pace) {
  InputBytes bytes;
  bytes.add(link.within_host).add(link.between_hosts).add(link.gamma).add(link.gamma_in_cache);
  bytes.add(call.collective).add(call.size).add(call.count).add(call.root).add(call.chunk_count);
  bytes.add(call.in_place).add(call.send_counts).add(call.recv_counts).add(call.cell_bytes);
  bytes.add(call.layout().host_of_rank).add(call.layout().cores_of_host);
  bytes.add(element_size).add(pace);
  return bytes.take();
}

}  // namespace

AlgorithmChoice CostModel::recall(const CollectiveCall& call, std::size_t element_size, Pace pace) const {
  // The answer as text: the algorithm's name, its predicted seconds (exact, in hex) and the explanation.
  const std::string answer = memo_->recall(inputs_of(link_, call, element_size, pace), [&] {
    const AlgorithmChoice choice = evaluate(call, element_size, pace);
    return fmt::format("{}\n{:a}\n{}", choice.algorithm->name, choice.predicted_seconds, choice.explanation);
  });
  const std::size_t name_end = answer.find('\n');
  const std::size_t seconds_end = answer.find('\n', name_end + 1);
  const Algorithm* algorithm =
      name_end == std::string::npos ? nullptr : find_algorithm(call.collective, answer.substr(0, name_end));
  if (algorithm == nullptr || seconds_end == std::string::npos) return evaluate(call, element_size, pace);
  return {algorithm, std::strtod(answer.substr(name_end + 1, seconds_end - name_end - 1).c_str(), nullptr),
          answer.substr(seconds_end + 1)};
}

const AlgorithmChoice& CostModel::look_up(const Key& key, const CollectiveCall& call,
                                          std::size_t element_size, Pace pace) {
  auto it = choices_.find(key);
  if (it == choices_.end()) {
    AlgorithmChoice choice = memo_ ? recall(call, element_size, pace) : evaluate(call, element_size, pace);
    if (choices_.size() >= kMaxCached) {
      choices_.clear();
      last_[0] = last_[1] = Last{};
    }
    it = choices_.emplace(key, std::move(choice)).first;
  }
  last_[pace == Pace::Stream ? 1 : 0] = Last{key, &it->second};
  return it->second;
}

AlgorithmChoice CostModel::evaluate(const CollectiveCall& call, std::size_t element_size, Pace pace) const {
  const bool stream = pace == Pace::Stream;
  const std::span<const Algorithm> candidates = algorithms(call.collective);
  if (candidates.size() == 1) {
    // Nothing to choose; all-to-all-v could not be timed anyway: a rank knows only its own counts.
    return {&candidates[0], 0,
            fmt::format("{} on {} ranks: {} (the only algorithm)", to_string(call.collective), call.size,
                        candidates[0].name)};
  }
  AlgorithmChoice best;
  Prediction best_prediction;
  // Slower than this by the time a simulation reaches it, a candidate cannot beat the best so far (not
  // even as a tie): its simulation stops there. Nothing is bounded until there is a best.
  const auto losing_bound = [&] {
    PredictionBound bound;
    if (best.algorithm == nullptr) return bound;
    if (stream)
      bound.stream_seconds = best_prediction.stream_seconds * (1 + kTie);
    else
      bound.seconds = best_prediction.seconds * (1 + kTie);
    return bound;
  };
  std::string explanation;
  double fastest[2] = {0, 0};                 // of the flat candidates, of the two-level ones
  bool fastest_is_bound[2] = {false, false};  // a cut-off simulation's lower bound
  // With one host, or one rank per host, a two-level algorithm is a flat one by another name, listed
  // after it: simulating it again would cost a first call at hundreds of ranks a tenth of a second.
  const std::string shape = host_shape(call.layout());
  for (const Algorithm& candidate : candidates) {
    if (candidate.two_level && shape.empty()) continue;
    const Prediction prediction = predict(candidate, call, element_size, link_, losing_bound());
    const double seconds = stream ? prediction.stream_seconds : prediction.seconds;
    explanation += fmt::format("{}{} {}{:.1f} us", explanation.empty() ? "" : ", ", candidate.name,
                               prediction.cut_off ? "> " : "", seconds * 1e6);
    const int kind = candidate.two_level ? 1 : 0;
    if (fastest[kind] == 0 || seconds < fastest[kind]) {
      fastest[kind] = seconds;
      fastest_is_bound[kind] = prediction.cut_off;
    }
    if (prediction.cut_off) continue;  // it cannot beat the best so far
    const double alpha = link_.slowest_alpha();
    const bool better =
        best.algorithm == nullptr ||
        (stream ? beats_in_stream(prediction, best_prediction, alpha)
                : beats(prediction, best_prediction.seconds, best_prediction.messages, alpha));
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
  // Flat or two-level: where the layout makes them differ, say how the best of each compare.
  if (!shape.empty() && fastest[0] > 0 && fastest[1] > 0)
    best.explanation +=
        fmt::format("; on {} the best two-level algorithm takes {}{:.2f}x the best flat one's time", shape,
                    fastest_is_bound[1]   ? "more than "
                    : fastest_is_bound[0] ? "less than "
                                          : "",
                    fastest[1] / fastest[0]);
  return best;
}

}  // namespace canopy::collectives
