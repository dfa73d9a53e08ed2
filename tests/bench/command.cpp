#include "tests/bench/command.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace canopy::bench::testing {

CommandResult run_command(const std::string& command, int timeout_seconds) {
  CommandResult result;
  // timeout(1) guarantees the deadline; --kill-after covers a child that ignores SIGTERM.
  std::string line = fmt::format("timeout --kill-after=5 {} {} 2>&1", timeout_seconds, command);
  std::FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.output.append(buffer, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace canopy::bench::testing
