// Forked processes that a test can wait for, signal and time one by one: the fork harness under
// run_processes (ranks.hpp), and what a chaos trial drives directly.
//
// The parent should have no other thread running while this forks: a child inherits any lock another
// thread holds (the allocator's, a sanitizer's) held forever. Run servers as processes
// (StoreServerProcess), not threads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace canopy::testing {

using Clock = std::chrono::steady_clock;

// What the child's body reports about itself: one line, sent to the parent before it exits.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  // The process is set up and about to work; `detail` (one line) reaches ProcessEnd::ready_detail.
  void ready(const std::string& detail = "") const;
  // The last word, one line: "ok ...", "error <code> ...", "wrong ...".
  void outcome(const std::string& line) const;

 private:
  int fd_;
};

// How one process ended, as the parent saw it.
struct ProcessEnd {
  bool ready = false;  // it said ready()
  Clock::time_point ready_at;
  std::string ready_detail;
  bool ended = false;  // it exited or died before the group's deadline
  Clock::time_point ended_at;
  int exit_code = -1;      // when it exited
  int signal = 0;          // when a signal ended it
  bool timed_out = false;  // killed by kill_unfinished()
  std::string outcome;     // its outcome() line, "" when it never sent one
  bool ok() const { return ended && exit_code == 0 && signal == 0 && !timed_out; }
  std::string describe() const;
};

class ProcessGroup {
 public:
  // Forks `n` processes running body(index, reporter). A body that returns exits 0, one that throws
  // reports "exception <what>" (also on stderr) and exits 1; nothing of the parent's runs in the child
  // after the body.
  ProcessGroup(int n, const std::function<void(int index, const Reporter& reporter)>& body);
  ~ProcessGroup();  // kills (SIGKILL) and reaps whatever still runs
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int size() const { return static_cast<int>(pids_.size()); }
  pid_t pid(int index) const { return pids_[index]; }
  const ProcessEnd& end(int index) const { return ends_[index]; }

  // Waits until every process in `indices` said ready (or ended); false at the deadline.
  bool wait_ready(const std::vector<int>& indices, Clock::time_point deadline);
  // Waits until every process in `indices` ended; false at the deadline (they keep running).
  bool wait_ended(const std::vector<int>& indices, Clock::time_point deadline);
  void signal(int index, int signal_number);  // nothing once the process has been reaped
  // SIGKILLs every process still running, marks it timed out, and reaps it.
  void kill_unfinished();

 private:
  void pump(Clock::time_point until);  // reads reports and reaps children until `until` or news
  void wait_ended_all();
  void take_lines(int index);  // the complete lines that arrived from `index`
  std::vector<pid_t> pids_;
  std::vector<int> pipes_;  // read ends, -1 once at end of stream
  std::vector<std::string> buffers_;
  std::vector<ProcessEnd> ends_;
};

}  // namespace canopy::testing
