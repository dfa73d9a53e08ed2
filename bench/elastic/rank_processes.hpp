// Forked rank processes that report one line at a time over a shared pipe, and a parent that reads those
// lines with a bound, so that a rank that never writes again is seen as a hang rather than waited for.
// Shared by canopy-recovery-probe and canopy-chaos-trials.
//
// Fork before this process starts any thread: a child inherits every lock another thread holds.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace canopy::bench {

// CLOCK_MONOTONIC in seconds: comparable between the processes of one machine.
double now_seconds();

// One line on a pipe in a single write below PIPE_BUF, so lines of several writers never interleave.
void write_line(int fd, const std::string& line);

class RankProcesses {
 public:
  // Forks `count` children; child i runs body(i, report_fd), which must end the process (std::_Exit).
  RankProcesses(int count, const std::function<void(int index, int report_fd)>& body);
  ~RankProcesses();  // SIGKILLs and reaps whatever still runs
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  // The next line any child wrote, without its newline; none at `until` (now_seconds()) or once every
  // child has closed the pipe.
  std::optional<std::string> next_line(double until);
  void kill(int index, int signal_number);
  // Waits until every child has ended or `until`; SIGKILLs those still running then. Returns their
  // indices: the ones that hung.
  std::vector<int> reap(double until);
  // After reap(): the signal that ended child i (0 when it exited), and its exit status.
  int signal_of(int index) const { return signals_[static_cast<std::size_t>(index)]; }
  int exit_code_of(int index) const { return exit_codes_[static_cast<std::size_t>(index)]; }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> signals_, exit_codes_;
  std::vector<bool> reaped_;
  int read_fd_ = -1;
  std::string buffer_;
};

}  // namespace canopy::bench
