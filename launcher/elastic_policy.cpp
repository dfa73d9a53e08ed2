#include "launcher/elastic_policy.hpp"

#include <fmt/format.h>

namespace canopy::launcher {
namespace {

std::string ranks(int n) {
  return fmt::format("{} rank{}", n, n == 1 ? "" : "s");
}

std::string go_on(int n) {
  return fmt::format("{} {}", ranks(n), n == 1 ? "goes on" : "go on");
}

}  // namespace

DeathVerdict after_death(const ElasticRange& range, int max_restarts, const GroupCount& group,
                         const std::string& label) {
  const std::string named = label.empty() ? "--elastic " + range.text() : label;
  const int left = group.running + group.finished;
  if (left < range.min) {
    return {AfterDeath::StopTheJob,
            fmt::format("{} left ({} running, {} finished), fewer than the {} of {}", ranks(left),
                        group.running, group.finished, range.min, named)};
  }
  if (group.finished > 0) {
    return {AfterDeath::GoOn, fmt::format("{} finished already, so the job is ending; {} ({})",
                                          ranks(group.finished), go_on(group.running), named)};
  }
  if (group.replacements_started >= max_restarts) {
    return {AfterDeath::GoOn,
            fmt::format("--max-restarts {} {}; {} ({})", max_restarts,
                        max_restarts == 0 ? "allows none" : "is spent", go_on(group.running), named)};
  }
  return {AfterDeath::Replace,
          fmt::format("replacement {} of --max-restarts {}", group.replacements_started + 1, max_restarts)};
}

}  // namespace canopy::launcher
