// The link model as text: what CANOPY_COST_MODEL says, how ranks share measured figures through the
// store, and how the model reads to a person.
#pragma once

#include <string>
#include <string_view>

#include "collectives/schedules/host_layout.hpp"
#include "collectives/schedules/simulator.hpp"

namespace canopy::collectives {

// CANOPY_COST_MODEL's text as a model: "alpha_s,beta_s_per_byte,gamma_s_per_byte[,beta_eager_s_per_byte,
// eager_bytes]" sets every link; a second group after ';', "alpha_s,beta_s_per_byte[,beta_eager_s_per_byte,
// eager_bytes]", sets the links between hosts apart. Error(Config) naming the variable, the value and the
// forms for anything else.
LinkModel parse_cost_model(std::string_view text);

// One class of links and gamma, exactly (hex floats: the same figures on every rank), and back;
// Error(Protocol) for a malformed text.
struct MeasuredLink {
  LinkCost link;
  double gamma = 0;
  double gamma_in_cache = 0;  // LinkModel::gamma_in_cache
};
std::string encode(const MeasuredLink& measured);
MeasuredLink decode_measured_link(const std::string& text);

// "alpha 12.0 us, beta 1.60 GB/s (...), gamma 9.1 GB/s" for one class of links; both classes, where
// they differ; and the hosts whose ranks share cores.
std::string describe(const LinkModel& link, const HostLayout& hosts);

}  // namespace canopy::collectives
