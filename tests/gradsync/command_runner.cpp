#include "tests/gradsync/command_runner.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/ranks.hpp"

namespace canopy::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

}  // namespace

std::string CommandResult::describe() const {
  std::string status = timed_out ? "timed out"
                       : signal  ? fmt::format("killed by signal {}", signal)
                                 : fmt::format("exit {}", exit_code);
  return fmt::format("{}\n--- stdout ---\n{}--- stderr ---\n{}", status, out, err);
}

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env,
                          std::chrono::milliseconds timeout) {
  TempDir dir;  // output goes to files: no pipe to drain while waiting
  std::string out_path = dir.path() + "/out", err_path = dir.path() + "/err";
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || null < 0) _exit(126);
    dup2(null, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [name, value] : extra_env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  CommandResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto kill_at = std::chrono::steady_clock::time_point::max();
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline && !result.timed_out) {
      result.timed_out = true;  // SIGTERM first: canopy-run then stops its ranks too
      kill(pid, SIGTERM);
      kill_at = now + std::chrono::seconds(8);
    }
    if (now >= kill_at) {
      kill(-pid, SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

}  // namespace canopy::testing
