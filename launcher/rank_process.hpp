// The ranks as processes: starting one (in a process group of its own, so that stopping it also stops what
// it started; stdin from /dev/null; stdout and stderr inherited or captured through pipes; optionally bound
// to one CPU), how it ended, and the signals canopy-run reacts to.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "canopy/error.hpp"

namespace canopy::launcher {

struct RankProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends, non-blocking; -1 when the output is not captured
  int stderr_fd = -1;
};

// Thrown when the program cannot be started at all (a retry would fail the same way), with the errno
// and a message such as "cannot run 'foo': No such file or directory".
class SpawnFailure : public Error {
 public:
  SpawnFailure(const std::string& message, int error) : Error(ErrorCode::System, message), error_(error) {}
  int error() const { return error_; }

 private:
  int error_;
};

// Starts `command` (looked up in PATH like a shell does) with exactly `envp` ("NAME=value" strings), on
// CPU `cpu` alone when it is >= 0. The rank gets SIGKILL when canopy-run ends (PR_SET_PDEATHSIG), however
// it ends; spawn from the thread that lives as long as canopy-run, since the kernel sends it when the
// spawning *thread* exits. Throws SpawnFailure when the program cannot run, canopy::Error(System) when
// the rank cannot be set up (pipes, its process, the CPU binding).
RankProcess spawn_rank(const std::vector<std::string>& command, const std::vector<std::string>& envp,
                       bool capture_output, int cpu = -1);

// How a rank ended, in the words canopy-run reports it with and the status it exits with.
struct RankExit {
  int rank = -1;  // global rank
  pid_t pid = -1;
  int exit_code = 0;  // when it exited
  int signal = 0;     // when a signal killed it

  static RankExit from_wait_status(int rank, pid_t pid, int wait_status);

  bool failed() const { return exit_code != 0 || signal != 0; }
  // "rank 2 (pid 1234) exited with status 3" or "rank 2 (pid 1234) was killed by signal 9 (Killed)".
  std::string describe() const;
  // The status a shell would show for it: the exit code, or 128 + the signal.
  int shell_status() const { return signal != 0 ? 128 + signal : exit_code; }
};

// The signals canopy-run reacts to (SIGINT, SIGTERM, SIGHUP to forward; SIGCHLD for a rank's exit), turned
// into readable events on one descriptor, so that one poll() waits for output, exits and signals together.
class SignalWatch {
 public:
  // Blocks the signals in the calling thread and everything it starts later: construct it before any
  // other thread exists (the store server's included). Throws Error(System) when signalfd fails.
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  int fd() const { return fd_; }
  // Signals received since the last call, without waiting; SIGCHLD means "some child changed state".
  std::vector<int> take();

  // True for the signals that ask canopy-run to stop (and that it forwards to the ranks).
  static bool is_stop_request(int signal) {
    return signal == SIGINT || signal == SIGTERM || signal == SIGHUP;
  }

 private:
  sigset_t watched_{};
  sigset_t previous_mask_{};
  int fd_ = -1;
};

// --bind-to core: each local rank on a CPU of its own, as mpirun binds its ranks by default. The CPU for
// local rank `local_rank`: the launcher's allowed CPUs in order, wrapping around when ranks outnumber them.
int cpu_for_local_rank(int local_rank, const std::vector<int>& allowed);

}  // namespace canopy::launcher
