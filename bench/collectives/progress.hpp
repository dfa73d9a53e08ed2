// A one-line progress indicator for long sweeps: drawn on a terminal only (rank 0 decides whether to
// create one), never on a pipe or a file, so logs and redirected output stay clean.
//
// Under canopy-run a rank's stderr is a pipe to canopy-run's line prefixer, so isatty() says no even when
// the user watches a terminal. canopy-run says what its own stderr is in CANOPY_STDERR_IS_TERMINAL, and
// draws a rank's carriage-return line below the other output (docs/LAUNCHER.md): the line is drawn
// there too.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace canopy::bench {

class ProgressLine {
 public:
  // Enabled when `enabled` and what is written to `terminal` reaches a terminal (see reaches_terminal;
  // for stderr, canopy-run's word is read from the environment).
  ProgressLine(std::FILE* terminal, int total_steps, bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Shows "[ done+1/total ] what  (elapsed, about N s left)" for the step about to run.
  void starting(int done, const std::string& what);
  // Erases the line, e.g. before another line is printed to the same terminal.
  void clear();

  // Whether writes to `fd` reach a terminal: `fd` is one, or `fd` is a pipe to a launcher that says its
  // own output is one (`launcher_says_terminal`: CANOPY_STDERR_IS_TERMINAL=1 for stderr). The launcher's
  // word counts only for a pipe: a rank whose stderr was redirected to a file still draws nothing.
  static bool reaches_terminal(int fd, bool launcher_says_terminal);

  // The text shown, without terminal control characters (tests).
  static std::string describe(int done, int total, const std::string& what, double elapsed_seconds);

 private:
  std::FILE* terminal_;
  int total_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace canopy::bench
