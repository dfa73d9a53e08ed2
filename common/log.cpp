#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "canopy/error.hpp"
#include "common/settings.hpp"

namespace canopy::log {
namespace {

constexpr const char* kLevelNames[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"};

// CANOPY_DEBUG in the registry's grammar. A bad value leaves the default here, where nothing can throw;
// forming a communicator reports it (Error(Config)) with the other settings.
Level level_from_environment() {
  const char* text = std::getenv("CANOPY_DEBUG");
  if (text == nullptr || *text == '\0') return Level::Warn;
  try {
    const std::string_view word =
        settings::parse_choice("CANOPY_DEBUG", text, settings::find_spec("CANOPY_DEBUG")->choices);
    for (int i = 0; i < static_cast<int>(std::size(kLevelNames)); ++i)
      if (word == kLevelNames[i]) return static_cast<Level>(i);
  } catch (const canopy::Error&) {
  }
  return Level::Warn;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> value{static_cast<int>(level_from_environment())};
  return value;
}
std::atomic<int> g_rank{-1};

}  // namespace

Level level() {
  return static_cast<Level>(level_storage().load(std::memory_order_relaxed));
}
void set_level(Level lvl) {
  level_storage().store(static_cast<int>(lvl));
}
void set_rank(int rank) {
  g_rank.store(rank);
}

void write(Level lvl, std::string_view message) {
  int rank = g_rank.load();
  std::string line =
      rank >= 0 ? fmt::format("[canopy rank {} {}] {}\n", rank, kLevelNames[static_cast<int>(lvl)], message)
                : fmt::format("[canopy {}] {}\n", kLevelNames[static_cast<int>(lvl)], message);
  // One write() per line so that lines of concurrent threads and processes never interleave.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace canopy::log
