#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace canopy::testing {
namespace {

using Clock = std::chrono::steady_clock;

// SIGTERM first, then this long for the program to stop what it started before its group is killed.
constexpr std::chrono::seconds kTermGrace{5};
// After the kill, how long to keep reading pipes that processes outside the group may still hold.
constexpr std::chrono::seconds kDrainAfterKill{2};

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

std::vector<std::string> environment_with(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    auto eq = text.find('=');
    if (eq != std::string_view::npos) env[std::string(text.substr(0, eq))] = std::string(text.substr(eq + 1));
  }
  for (const auto& [name, value] : extra) env[name] = value;
  std::vector<std::string> strings;
  for (const auto& [name, value] : env) strings.push_back(name + "=" + value);
  return strings;
}

}  // namespace

std::string CommandResult::describe() const {
  std::string status = timed_out ? "timed out"
                       : signal  ? fmt::format("killed by signal {}", signal)
                                 : fmt::format("exit status {}", exit_code);
  return fmt::format("{} after {} ms\n--- stdout ---\n{}--- stderr ---\n{}", status, elapsed.count(), out,
                     err);
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& extra_env, Stderr stderr_goes)
    : started_(Clock::now()) {
  if (argv.empty()) throw std::invalid_argument("ChildProcess: no program");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_goes == Stderr::IntoStdout ? out[1] : err[1],
                                   STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<std::string> argv_strings = argv;
  std::vector<std::string> env_strings = environment_with(extra_env);
  auto args = c_strings(argv_strings);
  auto envp = c_strings(env_strings);
  int rc = posix_spawn(&pid_, args[0], &actions, &attributes, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (rc != 0) {
    reaped_ = true;
    throw std::runtime_error(fmt::format("cannot start {}: {}", argv_strings[0], std::strerror(rc)));
  }
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool ChildProcess::pump(int timeout_ms) {
  std::array<pollfd, 2> fds{{{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}}};
  ::poll(fds.data(), fds.size(), timeout_ms);
  std::array<std::string*, 2> sinks{&result_.out, &result_.err};
  std::array<int*, 2> owners{&out_fd_, &err_fd_};
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].fd < 0 || fds[i].revents == 0) continue;
    char buffer[65536];
    ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
    if (n > 0) {
      sinks[i]->append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(*owners[i]);
      *owners[i] = -1;
    }
  }
  if (!reaped_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) result_.signal = WTERMSIG(status);
    }
  }
  return !reaped_ || out_fd_ >= 0 || err_fd_ >= 0;
}

bool ChildProcess::wait_for(const std::string& collected, std::string_view text, int count,
                            std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (count_of(collected, text) < count) {
    if (Clock::now() >= deadline || !pump(20)) return false;
  }
  return true;
}

bool ChildProcess::wait_for_stdout(std::string_view text, int count, std::chrono::milliseconds timeout) {
  return wait_for(result_.out, text, count, timeout);
}

bool ChildProcess::wait_for_stderr(std::string_view text, int count, std::chrono::milliseconds timeout) {
  return wait_for(result_.err, text, count, timeout);
}

CommandResult ChildProcess::finish(std::chrono::milliseconds timeout) {
  enum class Stage { Running, Terminated, Killed } stage = Stage::Running;
  auto deadline = Clock::now() + timeout;
  while (pump(20)) {
    if (Clock::now() < deadline) continue;
    if (stage == Stage::Killed) break;  // what it left behind outside its group still holds the pipes
    result_.timed_out = true;
    if (stage == Stage::Running && !reaped_) {
      ::kill(pid_, SIGTERM);
      stage = Stage::Terminated;
      deadline = Clock::now() + kTermGrace;
    } else {
      if (!reaped_) ::kill(-pid_, SIGKILL);
      stage = Stage::Killed;
      deadline = Clock::now() + kDrainAfterKill;
    }
  }
  result_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
  return result_;
}

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env,
                          std::chrono::milliseconds timeout) {
  ChildProcess process(argv, extra_env);
  return process.finish(timeout);
}

CommandResult run_shell(const std::string& command_line, std::chrono::milliseconds timeout) {
  ChildProcess process({"/bin/sh", "-c", command_line}, {}, ChildProcess::Stderr::IntoStdout);
  return process.finish(timeout);
}

int count_of(std::string_view haystack, std::string_view needle) {
  int n = 0;
  for (auto at = haystack.find(needle); at != std::string_view::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool process_exists(pid_t pid) {
  // kill(0 or -1, 0) would ask about whole groups and always say yes.
  if (pid <= 0) throw std::invalid_argument(fmt::format("process_exists({}): not a process id", pid));
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace canopy::testing
