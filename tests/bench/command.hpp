// Runs a shell command line with a deadline and captures what it printed (stdout and stderr).
#pragma once

#include <string>

namespace canopy::bench::testing {

struct CommandResult {
  int exit_code = -1;  // 124 when `timeout` stopped it
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::string& command, int timeout_seconds = 60);

// The text of a file ("" when it cannot be read).
std::string read_file(const std::string& path);

}  // namespace canopy::bench::testing
