#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <strings.h>

namespace canopy::log {
namespace {

Level parse_level(const char* text) {
  if (text == nullptr || *text == '\0') return Level::Warn;
  struct Name {
    const char* name;
    Level level;
  };
  static constexpr Name kNames[] = {{"TRACE", Level::Trace}, {"DEBUG", Level::Debug}, {"INFO", Level::Info},
                                    {"WARN", Level::Warn},   {"ERROR", Level::Error}, {"OFF", Level::Off}};
  for (const auto& n : kNames)
    if (strcasecmp(text, n.name) == 0) return n.level;
  return Level::Warn;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> value{static_cast<int>(parse_level(std::getenv("CANOPY_DEBUG")))};
  return value;
}
std::atomic<int> g_rank{-1};

constexpr const char* kLevelNames[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"};

}  // namespace

Level level() { return static_cast<Level>(level_storage().load(std::memory_order_relaxed)); }
void set_level(Level lvl) { level_storage().store(static_cast<int>(lvl)); }
void set_rank(int rank) { g_rank.store(rank); }

void write(Level lvl, std::string_view message) {
  int rank = g_rank.load();
  std::string line = rank >= 0 ? fmt::format("[canopy rank {} {}] {}\n", rank, kLevelNames[static_cast<int>(lvl)], message)
                               : fmt::format("[canopy {}] {}\n", kLevelNames[static_cast<int>(lvl)], message);
  // One write() per line so that lines of concurrent threads and processes never interleave.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace canopy::log
