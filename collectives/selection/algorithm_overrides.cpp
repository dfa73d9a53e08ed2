#include "collectives/selection/algorithm_overrides.hpp"

#include <fmt/format.h>

#include <cctype>

#include "collectives/schedules/algorithms.hpp"
#include "common/error.hpp"

namespace canopy::collectives {
namespace {

constexpr Collective kCollectives[] = {
    Collective::Broadcast,     Collective::Reduce,  Collective::AllReduce, Collective::AllGather,
    Collective::ReduceScatter, Collective::Barrier, Collective::AllToAll,  Collective::AllToAllV,
    Collective::Gather,        Collective::Scatter};

// "all_reduce", "allreduce" and "all-reduce" all name the same collective.
std::string squash(std::string_view name) {
  std::string out;
  for (char c : name)
    if (c != '_' && c != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

std::string known_algorithms(Collective collective) {
  std::string names;
  for (const Algorithm& a : algorithms(collective)) names += fmt::format("{}, ", a.name);
  return names + "auto";
}

}  // namespace

std::map<Collective, std::string> parse_algorithm_overrides(std::string_view text) {
  std::map<Collective, std::string> overrides;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      bool known = false;
      for (Collective c : kCollectives) {
        if (find_algorithm(c, item) == nullptr) continue;
        overrides[c] = std::string(item);
        known = true;
      }
      if (!known)
        fail(
            ErrorCode::Config,
            "CANOPY_ALGO='{}': no collective has an algorithm '{}'; use an algorithm's name (ring, binomial, "
            "...) or collective=algorithm pairs such as allreduce=ring,broadcast=binomial",
            text, item);
      continue;
    }
    const std::string collective = squash(item.substr(0, eq));
    const std::string algorithm(item.substr(eq + 1));
    bool known = false;
    for (Collective c : kCollectives) {
      if (squash(to_string(c)) != collective) continue;
      known = true;
      if (algorithm != "auto" && find_algorithm(c, algorithm) == nullptr)
        fail(ErrorCode::Config, "CANOPY_ALGO='{}': {} has no algorithm '{}' (known: {})", text, to_string(c),
             algorithm, known_algorithms(c));
      overrides[c] = algorithm;
    }
    if (!known) {
      std::string names;
      for (Collective c : kCollectives)
        names += fmt::format("{}{}", names.empty() ? "" : ", ", squash(to_string(c)));
      fail(ErrorCode::Config, "CANOPY_ALGO='{}': unknown collective '{}' (known: {})", text,
           item.substr(0, eq), names);
    }
  }
  return overrides;
}

}  // namespace canopy::collectives
