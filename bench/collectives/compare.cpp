#include "bench/collectives/compare.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>

#include "common/error.hpp"

namespace canopy::bench {
namespace {

using SizeKey = std::tuple<std::string, int, std::uint64_t>;  // collective, ranks, bytes

SizeKey size_key(const nlohmann::ordered_json& row) {
  return {row.at("collective").get<std::string>(), row.at("ranks").get<int>(),
          row.at("bytes").get<std::uint64_t>()};
}

// The fastest row per key: Canopy runs several algorithms per size; the comparison takes its best.
std::map<SizeKey, nlohmann::ordered_json> fastest(const nlohmann::ordered_json& rows) {
  std::map<SizeKey, nlohmann::ordered_json> best;
  for (const auto& row : rows) {
    auto [it, fresh] = best.emplace(size_key(row), row);
    if (!fresh && row.at("time_us").get<double>() < it->second.at("time_us").get<double>()) it->second = row;
  }
  return best;
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

}  // namespace

std::string compare_table(const nlohmann::ordered_json& canopy_rows, const nlohmann::ordered_json& peer_rows,
                          const std::string& peer_name) {
  auto ours = fastest(canopy_rows);
  auto theirs = fastest(peer_rows);
  std::string text =
      fmt::format("{:>13} {:>5} {:>10} {:>18} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}\n",
                  "collective", "ranks", "size(B)", "canopy algo", "canopy us", peer_name + " us", "time",
                  "canopy", peer_name, "busbw", "canopy", peer_name);
  text += fmt::format("{:>13} {:>5} {:>10} {:>18} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}\n", "",
                      "", "", "", "", "", "ratio", "GB/s", "GB/s", "ratio", "%ceil", "%ceil");
  int matched = 0;
  for (const auto& [key, ours_row] : ours) {
    auto it = theirs.find(key);
    if (it == theirs.end()) continue;
    const nlohmann::ordered_json& peer = it->second;
    const double ceiling = ours_row.value("ceiling_busbw_gbps", 0.0);
    auto percent = [&](double busbw) {
      return ceiling > 0 ? fmt::format("{:.0f}", 100 * busbw / ceiling) : "-";
    };
    const double our_us = ours_row.at("time_us").get<double>(), peer_us = peer.at("time_us").get<double>();
    const double our_bw = ours_row.at("busbw_gbps").get<double>(),
                 peer_bw = peer.at("busbw_gbps").get<double>();
    text += fmt::format(
        "{:>13} {:>5} {:>10} {:>18} {:>10.1f} {:>10.1f} {:>8.2f} {:>8.3f} {:>8.3f} {:>8.2f} {:>7} {:>7}\n",
        std::get<0>(key), std::get<1>(key), std::get<2>(key), ours_row.at("algo").get<std::string>(), our_us,
        peer_us, ratio(our_us, peer_us), our_bw, peer_bw, ratio(our_bw, peer_bw), percent(our_bw),
        percent(peer_bw));
    ++matched;
  }
  if (matched == 0)
    throw std::invalid_argument(
        fmt::format("no row of {} matches a Canopy row (same collective, ranks and bytes)", peer_name));
  return text + "# time ratio = canopy / " + peer_name +
         " (below 1: Canopy faster); busbw ratio above 1: Canopy faster\n";
}

nlohmann::ordered_json read_rows(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::Config, "cannot read '{}'", path);
  try {
    nlohmann::ordered_json rows = nlohmann::ordered_json::parse(in);
    if (!rows.is_array()) fail(ErrorCode::Config, "'{}' is not a JSON array of benchmark rows", path);
    return rows;
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::Config, "'{}' is not valid JSON: {}", path, e.what());
  }
}

}  // namespace canopy::bench
