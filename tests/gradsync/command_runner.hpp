// Running a program (here: the real canopy-run with the example trainer) to completion with a deadline,
// its stdout and stderr captured.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace canopy::testing {

struct CommandResult {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string out, err;
  std::string describe() const;  // status and both outputs, for failure messages
};

// Runs argv with `extra_env` added to this process's environment; SIGKILL to its process group after
// `timeout`.
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env,
                          std::chrono::milliseconds timeout);

}  // namespace canopy::testing
