#include "bench/collectives/phases.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace canopy::bench {

void Phases::mark(const std::string& phase) {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  auto it = std::find_if(seconds_.begin(), seconds_.end(), [&](const auto& p) { return p.first == phase; });
  if (it == seconds_.end())
    seconds_.emplace_back(phase, elapsed);
  else
    it->second += elapsed;
}

double Phases::seconds(const std::string& phase) const {
  for (const auto& [name, s] : seconds_)
    if (name == phase) return s;
  return 0;
}

std::string Phases::line(double since_launch_at_start) const {
  std::string text;
  if (since_launch_at_start >= 0) text = fmt::format("launch {:.2f} s", since_launch_at_start);
  for (const auto& [name, s] : seconds_) text += fmt::format("{}{} {:.2f} s", text.empty() ? "" : ", ", name, s);
  const double total = std::chrono::duration<double>(last_ - start_).count();
  if (since_launch_at_start >= 0)
    text += fmt::format("; ended {:.2f} s after the launch", since_launch_at_start + total);
  else
    text += fmt::format("; {:.2f} s in all (no CANOPY_PROBE_LAUNCH_NS: the launch not known)", total);
  return note_.empty() ? text : text + "; " + note_;
}

}  // namespace canopy::bench
