// Turns a rank's byte stream into whole lines that start with "[rank] ", so that the lines of several ranks
// can share one terminal without being cut into each other.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace canopy::launcher {

class LinePrefixer {
 public:
  // A line longer than max_line bytes is cut there, so one rank cannot make the launcher buffer without
  // bound; each piece becomes a line of its own.
  explicit LinePrefixer(std::string prefix, std::size_t max_line = 1 << 20);

  // Appends to `out` every line completed by `bytes`; keeps the unfinished tail for the next call.
  void feed(std::string_view bytes, std::string& out);
  // Appends the unfinished tail, if any, as a line of its own (the stream has ended).
  void finish(std::string& out);

  bool has_partial_line() const { return !partial_.empty(); }

 private:
  void emit(std::string_view tail, std::string& out);

  std::string prefix_;
  std::size_t max_line_;
  std::string partial_;
};

}  // namespace canopy::launcher
