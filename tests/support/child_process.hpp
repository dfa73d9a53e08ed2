// Running a program from a test: the real canopy-run, canopy-bench, a trainer or a shell line, with a
// deadline, its output captured while it runs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::testing {

// How a program ended and what it printed.
struct CommandResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  std::string out;  // stdout (and stderr too, for a shell line: run_shell)
  std::string err;
  std::chrono::milliseconds elapsed{0};
  std::string describe() const;  // status, time and both outputs, for failure messages
};

// One running program: argv[0] is its path (no PATH search); `extra_env` is added to (or replaces in)
// this process's environment; stdin is /dev/null. It leads a process group of its own, so that what it
// starts can be stopped with it.
class ChildProcess {
 public:
  enum class Stderr { Apart, IntoStdout };
  explicit ChildProcess(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& extra_env = {},
                        Stderr stderr_goes = Stderr::Apart);
  ~ChildProcess();  // kills the process group if finish() was not called
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Collects output until stdout (stderr) holds `count` occurrences of `text`; false at the timeout or exit.
  bool wait_for_stdout(std::string_view text, int count, std::chrono::milliseconds timeout);
  bool wait_for_stderr(std::string_view text, int count, std::chrono::milliseconds timeout);
  // What the program has printed on stdout so far (as collected by the waits).
  const std::string& out_so_far() const { return result_.out; }
  // Collects everything until the program exits. At `timeout` it gets SIGTERM (canopy-run then stops
  // its ranks), and its process group SIGKILL a few seconds later; timed_out is then set.
  CommandResult finish(std::chrono::milliseconds timeout);

 private:
  bool wait_for(const std::string& collected, std::string_view text, int count,
                std::chrono::milliseconds timeout);
  bool pump(int timeout_ms);  // reads what is there; false once the program was reaped and its pipes closed
  std::chrono::steady_clock::time_point started_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool reaped_ = false;
  CommandResult result_;
};

// Runs argv to completion (ChildProcess::finish).
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env,
                          std::chrono::milliseconds timeout);
// Runs a shell command line (/bin/sh -c) to completion, stderr into `out` with stdout.
CommandResult run_shell(const std::string& command_line,
                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Occurrences of `needle` in `haystack`.
int count_of(std::string_view haystack, std::string_view needle);
// The lines of `text` without their newlines.
std::vector<std::string> lines_of(const std::string& text);
// The text of a file ("" when it cannot be read).
std::string read_file(const std::string& path);
// True while a process with this pid exists (a zombie counts).
bool process_exists(pid_t pid);

}  // namespace canopy::testing
