#include "bench/collectives/choice.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

namespace canopy::bench {
namespace {

using ContestKey = std::tuple<std::string, int, std::uint64_t, bool>;  // collective, ranks, bytes, in place

ContestKey contest_key(const nlohmann::ordered_json& row) {
  return {row.at("collective").get<std::string>(), row.at("ranks").get<int>(), row.at("bytes").get<std::uint64_t>(),
          row.value("in_place", false)};
}

double time_of(const nlohmann::ordered_json& row) { return row.at("time_us").get<double>(); }

struct Contest {
  const nlohmann::ordered_json* chosen = nullptr;   // the auto row
  const nlohmann::ordered_json* fastest = nullptr;  // the fastest row of an explicitly requested algorithm
};

}  // namespace

std::string choice_table(const nlohmann::ordered_json& rows) {
  std::map<ContestKey, Contest> contests;
  for (const auto& row : rows) {
    Contest& contest = contests[contest_key(row)];
    if (row.value("requested_algo", row.at("algo").get<std::string>()) == "auto")
      contest.chosen = &row;
    else if (contest.fastest == nullptr || time_of(row) < time_of(*contest.fastest))
      contest.fastest = &row;
  }

  std::string text = fmt::format("{:>13} {:>5} {:>10} {:>18} {:>10} {:>10} {:>18} {:>10} {:>10} {:>9}\n",
                                 "collective", "ranks", "size(B)", "auto chose", "auto us", "model us",
                                 "fastest", "its us", "model us", "auto/best");
  int compared = 0;
  double log_sum = 0, worst = 0;
  for (const auto& [key, contest] : contests) {
    if (contest.chosen == nullptr || contest.fastest == nullptr) continue;
    const auto& chosen = *contest.chosen;
    const auto& fastest = *contest.fastest;
    const double ratio = time_of(chosen) / time_of(fastest);
    text += fmt::format("{:>13} {:>5} {:>10} {:>18} {:>10.1f} {:>10.1f} {:>18} {:>10.1f} {:>10.1f} {:>9.2f}\n",
                        std::get<0>(key), std::get<1>(key), std::get<2>(key), chosen.at("algo").get<std::string>(),
                        time_of(chosen), chosen.value("predicted_time_us", 0.0),
                        fastest.at("algo").get<std::string>(), time_of(fastest),
                        fastest.value("predicted_time_us", 0.0), ratio);
    ++compared;
    log_sum += std::log(ratio);
    worst = std::max(worst, ratio);
  }
  if (compared == 0)
    throw std::invalid_argument("no size has both an auto row and an explicit algorithm's row: run the sweep with "
                                "--algo all,auto");
  // auto can beat the fastest explicit run (the same algorithm, measured again, at a luckier moment):
  // ratios a little below 1 are noise, not a better choice.
  return text + fmt::format("# auto / fastest over {} sizes: geometric mean {:.2f}, worst {:.2f}\n", compared,
                            std::exp(log_sum / compared), worst);
}

}  // namespace canopy::bench
