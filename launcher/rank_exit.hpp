// How a rank ended, in the words canopy-run reports it with and the status it exits with.
#pragma once

#include <sys/types.h>

#include <string>

namespace canopy::launcher {

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

}  // namespace canopy::launcher
