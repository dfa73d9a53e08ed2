#include "collectives/elastic/grow_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <sstream>

#include "collectives/selection/link_model_text.hpp"
#include "common/error.hpp"

namespace canopy::collectives {

// One line per field, so that a person reads it with a store's client.
std::string GrowPlan::encode() const {
  const MeasuredLink within{link.within_host, link.gamma, link.gamma_in_cache};
  const MeasuredLink between{link.between_hosts, link.gamma, link.gamma_in_cache};
  return fmt::format("grow\n{}\n{} {} {} {} {} {}\n{}\n{}\n{}\n", prefix, comm_id, generation, size, first_newcomer,
                     first_ticket, admitted, fmt::join(world_ranks, ","), collectives::encode(within),
                     collectives::encode(between));
}

GrowPlan GrowPlan::decode(const std::string& text) {
  GrowPlan plan;
  std::istringstream lines(text);
  std::string tag, numbers, ranks, within, between;
  if (!std::getline(lines, tag) || tag != "grow" || !std::getline(lines, plan.prefix) ||
      !std::getline(lines, numbers) || !std::getline(lines, ranks) || !std::getline(lines, within) ||
      !std::getline(lines, between))
    fail(ErrorCode::Protocol, "malformed grow plan '{}' in the store", text);
  std::istringstream fields(numbers);
  if (!(fields >> plan.comm_id >> plan.generation >> plan.size >> plan.first_newcomer >> plan.first_ticket >>
        plan.admitted))
    fail(ErrorCode::Protocol, "malformed grow plan '{}' in the store", text);
  std::istringstream list(ranks);
  for (std::string rank; std::getline(list, rank, ',');) {
    int value = -1;
    if (std::from_chars(rank.data(), rank.data() + rank.size(), value).ec != std::errc() || value < 0)
      fail(ErrorCode::Protocol, "malformed grow plan '{}' in the store: '{}' is not a job rank", text, rank);
    plan.world_ranks.push_back(value);
  }
  if (static_cast<int>(plan.world_ranks.size()) != plan.size || plan.first_newcomer > plan.size)
    fail(ErrorCode::Protocol, "grow plan '{}' lists {} ranks for a group of {}", text, plan.world_ranks.size(),
         plan.size);
  const MeasuredLink inside = decode_measured_link(within);
  plan.link.within_host = inside.link;
  plan.link.gamma = inside.gamma;
  plan.link.gamma_in_cache = inside.gamma_in_cache;
  plan.link.between_hosts = decode_measured_link(between).link;
  return plan;
}

}  // namespace canopy::collectives
