// The signals canopy-run reacts to (SIGINT, SIGTERM, SIGHUP to forward; SIGCHLD for a rank's exit), turned
// into readable events on one descriptor, so that one poll() waits for output, exits and signals together.
#pragma once

#include <signal.h>

#include <vector>

namespace canopy::launcher {

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

}  // namespace canopy::launcher
