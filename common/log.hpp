// Diagnostics on stderr, filtered by CANOPY_DEBUG (WARN by default; INFO explains choices; TRACE is chatty).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace canopy::log {

enum class Level { Trace = 0, Debug = 1, Info = 2, Warn = 3, Error = 4, Off = 5 };

// Read once from CANOPY_DEBUG; set_level overrides (tests).
Level level();
void set_level(Level level);
// Shown in every line ("[canopy rank 3]") once the process knows its rank.
void set_rank(int rank);
void write(Level level, std::string_view message);

template <typename... Args>
void emit(Level lvl, fmt::format_string<Args...> format, Args&&... args) {
  if (lvl >= level()) write(lvl, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  emit(Level::Info, format, std::forward<Args>(args)...);
}
template <typename... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  emit(Level::Debug, format, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  emit(Level::Warn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  emit(Level::Error, format, std::forward<Args>(args)...);
}

}  // namespace canopy::log
