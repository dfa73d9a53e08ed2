#include "common/cpu_list.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include "common/error.hpp"

namespace canopy {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  if (cpus.empty()) {
    const int count = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int cpu = 0; cpu < count; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

int usable_cores() {
  return static_cast<int>(allowed_cpus().size());
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (last > i) text += '-' + std::to_string(cpus[last]);
    i = last + 1;
  }
  return text;
}

std::vector<int> parse_cpu_list(std::string_view text) {
  const std::string_view whole = text;
  auto number = [&](std::string_view& rest) {
    int value = -1;
    auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (error != std::errc{} || value < 0 || value >= CPU_SETSIZE)
      fail(ErrorCode::Protocol, "malformed CPU list '{}' (expected e.g. '0-3,8')", whole);
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    return value;
  };
  std::vector<int> cpus;
  while (!text.empty()) {
    const int first = number(text);
    int last = first;
    if (!text.empty() && text.front() == '-') {
      text.remove_prefix(1);
      last = number(text);
      if (last < first) fail(ErrorCode::Protocol, "malformed CPU list '{}': range {}-{}", whole, first, last);
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    if (text.empty()) break;
    if (text.front() != ',' || text.size() == 1)
      fail(ErrorCode::Protocol, "malformed CPU list '{}' (expected e.g. '0-3,8')", whole);
    text.remove_prefix(1);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace canopy
