#include "collectives/schedules/lower_bounds.hpp"

#include <algorithm>
#include <limits>

namespace canopy::collectives {

// What one rank's schedule alone says a call takes at least: a rank's messages of one class of links
// go one after another on its outgoing link, and those it receives on its incoming one, each for at
// least alpha and its bytes at the faster of the two rates; in a stream the rank pays for every message
// it sends. Far cheaper than simulating every rank, and often enough to rule an algorithm out.
Prediction one_rank_bound(const Algorithm& algorithm, CollectiveCall call, int rank, std::size_t element_size,
                          const LinkModel& model) {
  call.rank = rank;
  const Schedule schedule = algorithm.build(call);
  const HostLayout& hosts = call.layout();
  double sending[2] = {0, 0}, receiving[2] = {0, 0};  // by link class: within a host, between hosts
  Prediction bound;
  bound.cut_off = true;
  for (const Step& step : schedule.steps) {
    const bool is_send = step.kind == StepKind::Send;
    if (!is_send && step.kind != StepKind::Recv && step.kind != StepKind::RecvReduce) continue;
    const bool same_host = hosts.host_of(rank) == hosts.host_of(step.peer);
    const LinkCost& link = model.link(same_host);
    const double bytes = static_cast<double>((is_send ? step.src.count : step.dst.count) * element_size);
    const double seconds = link.alpha + bytes * std::min(link.beta, link.beta_eager);
    (is_send ? sending : receiving)[same_host ? 0 : 1] += seconds;
    if (is_send) bound.stream_seconds += seconds;
  }
  bound.seconds = std::max({sending[0], sending[1], receiving[0], receiving[1]});
  return bound;
}

// A lower bound past `bound`, found without simulating every rank: the chain of messages the algorithm
// states, then rank 0's schedule alone. Nothing where neither rules the algorithm out.
std::optional<Prediction> ruled_out(const Algorithm& algorithm, const CollectiveCall& call,
                                    std::size_t element_size, const LinkModel& model,
                                    const PredictionBound& bound) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  if (bound.seconds == kNone && bound.stream_seconds == kNone) return std::nullopt;
  if (algorithm.chain_of_messages != nullptr) {
    Prediction chain;
    chain.cut_off = true;
    chain.seconds = static_cast<double>(algorithm.chain_of_messages(call)) *
                    std::min(model.within_host.alpha, model.between_hosts.alpha);
    if (chain.seconds > bound.seconds) return chain;
  }
  const Prediction one_rank = one_rank_bound(algorithm, call, 0, element_size, model);
  if (one_rank.seconds > bound.seconds || one_rank.stream_seconds > bound.stream_seconds) return one_rank;
  return std::nullopt;
}

}  // namespace canopy::collectives
