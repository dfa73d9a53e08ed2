// Starting one rank: the program in a process group of its own (so that stopping it also stops what it
// started), stdin from /dev/null, stdout and stderr either inherited or captured through pipes.
#pragma once

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

// Starts `command` (looked up in PATH like a shell does) with exactly `envp` ("NAME=value" strings).
// Throws SpawnFailure when it cannot run, canopy::Error(System) when pipes cannot be made.
RankProcess spawn_rank(const std::vector<std::string>& command, const std::vector<std::string>& envp,
                       bool capture_output);

}  // namespace canopy::launcher
