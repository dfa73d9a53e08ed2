#include "launcher/rank_exit.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstring>

namespace canopy::launcher {

RankExit RankExit::from_wait_status(int rank, pid_t pid, int wait_status) {
  RankExit exit{rank, pid, 0, 0};
  if (WIFEXITED(wait_status)) exit.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) exit.signal = WTERMSIG(wait_status);
  return exit;
}

std::string RankExit::describe() const {
  if (signal != 0) {
    return fmt::format("rank {} (pid {}) was killed by signal {} ({})", rank, pid, signal, strsignal(signal));
  }
  return fmt::format("rank {} (pid {}) exited with status {}", rank, pid, exit_code);
}

}  // namespace canopy::launcher
