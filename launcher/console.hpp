// canopy-run's own writes to stdout and stderr: whole lines in one write(), so that they never land in the
// middle of a rank's line, and a closed terminal or pipe never kills the launcher.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <string_view>

namespace canopy::launcher {

// Writes all of `text` to `fd`, retrying short writes; drops it when the reader is gone (EPIPE).
void write_fully(int fd, std::string_view text);

// "canopy-run: <message>\n" on stderr.
template <typename... Args>
void report(fmt::format_string<Args...> format, Args&&... args) {
  write_fully(STDERR_FILENO,
              fmt::format("canopy-run: {}\n", fmt::format(format, std::forward<Args>(args)...)));
}

}  // namespace canopy::launcher
