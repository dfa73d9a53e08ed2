// A one-line progress indicator for long sweeps: drawn on a terminal only (rank 0 decides whether to
// create one), never on a pipe or a file, so logs and redirected output stay clean.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace canopy::bench {

class ProgressLine {
 public:
  // Enabled when `enabled` and `terminal` is a terminal (isatty).
  ProgressLine(std::FILE* terminal, int total_steps, bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Shows "[ done+1/total ] what  (elapsed, about N s left)" for the step about to run.
  void starting(int done, const std::string& what);
  // Erases the line, e.g. before another line is printed to the same terminal.
  void clear();

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
