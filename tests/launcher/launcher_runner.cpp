#include "tests/launcher/launcher_runner.hpp"

#include <cstdio>
#include <string_view>

namespace canopy::testing {
namespace {

std::vector<std::string> canopy_run_with(const std::vector<std::string>& args) {
  std::vector<std::string> argv{canopy_run_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

std::string canopy_run_path() {
  return CANOPY_RUN_PATH;
}
std::string launcher_probe_path() {
  return LAUNCHER_PROBE_PATH;
}

LauncherProcess::LauncherProcess(const std::vector<std::string>& args,
                                 const std::map<std::string, std::string>& extra_env)
    : ChildProcess(canopy_run_with(args), extra_env) {}

LauncherResult run_launcher(const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& extra_env,
                            std::chrono::milliseconds timeout) {
  return run_command(canopy_run_with(args), extra_env, timeout);
}

std::map<int, std::map<std::string, std::string>> environments_by_rank(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> by_rank;
  for (const std::string& line : lines_of(out)) {
    int rank = -1, prefix_length = 0;
    if (std::sscanf(line.c_str(), "[%d] %n", &rank, &prefix_length) != 1 || prefix_length == 0) continue;
    std::string_view rest = std::string_view(line).substr(static_cast<std::size_t>(prefix_length));
    auto eq = rest.find('=');
    if (eq == 0 || eq == std::string_view::npos) continue;
    std::string_view name = rest.substr(0, eq);
    if (name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != std::string_view::npos) continue;
    by_rank[rank][std::string(name)] = std::string(rest.substr(eq + 1));
  }
  return by_rank;
}

}  // namespace canopy::testing
