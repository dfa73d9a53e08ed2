// Running the real canopy-run binary from a test: its exit, its stdout and stderr kept apart, and signals.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::testing {

// Paths of the binaries under test (compile definitions from CMake).
std::string canopy_run_path();
std::string launcher_probe_path();

struct LauncherResult {
  int exit_code = -1;  // when canopy-run exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
  std::string describe() const;  // for failure messages: status and both outputs
};

class LauncherProcess {
 public:
  // Starts canopy-run with `args`; `extra_env` is added to (or replaces in) this process's environment.
  explicit LauncherProcess(const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& extra_env = {});
  ~LauncherProcess();  // kills canopy-run if finish() was not called
  LauncherProcess(const LauncherProcess&) = delete;
  LauncherProcess& operator=(const LauncherProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Collects output until stdout holds `count` occurrences of `text`; false at the timeout or exit.
  bool wait_for_stdout(std::string_view text, int count, std::chrono::milliseconds timeout);
  bool wait_for_stderr(std::string_view text, int count, std::chrono::milliseconds timeout);
  // What canopy-run has printed on stdout so far (as collected by wait_for_stdout).
  const std::string& out_so_far() const { return result_.out; }
  // Collects everything until canopy-run exits; SIGKILL after `timeout` (then timed_out is set).
  LauncherResult finish(std::chrono::milliseconds timeout);

 private:
  bool wait_for(const std::string& collected, std::string_view text, int count,
                std::chrono::milliseconds timeout);
  bool pump(int timeout_ms);  // reads what is there; false once canopy-run was reaped
  std::chrono::steady_clock::time_point started_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool reaped_ = false;
  LauncherResult result_;
};

LauncherResult run_launcher(const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& extra_env = {},
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The NAME=value lines of the probe's "env" step, by rank, from canopy-run's prefixed stdout.
std::map<int, std::map<std::string, std::string>> environments_by_rank(const std::string& out);
// Occurrences of `needle` in `haystack`.
int count_of(std::string_view haystack, std::string_view needle);
// The lines of `text` without their newlines.
std::vector<std::string> lines_of(const std::string& text);
// True while a process with this pid exists (a zombie counts).
bool process_exists(pid_t pid);

}  // namespace canopy::testing
