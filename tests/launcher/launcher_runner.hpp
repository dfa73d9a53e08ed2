// Running the real canopy-run binary from a test (tests/support/child_process.hpp does the running).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"

namespace canopy::testing {

// Paths of the binaries under test (compile definitions from CMake).
std::string canopy_run_path();
std::string launcher_probe_path();

using LauncherResult = CommandResult;

// canopy-run started with `args`; `extra_env` is added to (or replaces in) this process's environment.
class LauncherProcess : public ChildProcess {
 public:
  explicit LauncherProcess(const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& extra_env = {});
};

LauncherResult run_launcher(const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& extra_env = {},
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The NAME=value lines of the probe's "env" step, by rank, from canopy-run's prefixed stdout.
std::map<int, std::map<std::string, std::string>> environments_by_rank(const std::string& out);

}  // namespace canopy::testing
