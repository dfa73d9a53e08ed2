#include "bench/collectives/progress.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/settings.hpp"

namespace canopy::bench {

namespace {

// canopy-run's word that its own stderr, where a rank's stderr pipe ends, is a terminal.
bool launcher_says_stderr_is_terminal() {
  return Settings::from_environment().flag("CANOPY_STDERR_IS_TERMINAL");
}

}  // namespace

ProgressLine::ProgressLine(std::FILE* terminal, int total_steps, bool enabled)
    : terminal_(terminal),
      total_(total_steps),
      enabled_(
          enabled && terminal != nullptr &&
          reaches_terminal(::fileno(terminal), terminal == stderr && launcher_says_stderr_is_terminal())),
      start_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() {
  clear();
}

bool ProgressLine::reaches_terminal(int fd, bool launcher_says_terminal) {
  if (::isatty(fd) == 1) return true;
  struct stat info {};
  return launcher_says_terminal && ::fstat(fd, &info) == 0 && S_ISFIFO(info.st_mode);
}

std::string ProgressLine::describe(int done, int total, const std::string& what, double elapsed_seconds) {
  std::string text = fmt::format("[ {}/{} ] {}  ({:.0f} s", done + 1, total, what, elapsed_seconds);
  // Steps differ wildly in cost (4 B vs 64 MiB), so the estimate is rough; it still says minutes or seconds.
  if (done > 0) text += fmt::format(", about {:.0f} s left", elapsed_seconds / done * (total - done));
  return text + ")";
}

void ProgressLine::starting(int done, const std::string& what) {
  if (!enabled_) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // \r returns to the line's start, \033[K erases what a longer previous text left behind.
  fmt::print(terminal_, "\r\033[K{}", describe(done, total_, what, elapsed));
  std::fflush(terminal_);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!enabled_ || !shown_) return;
  fmt::print(terminal_, "\r\033[K");
  std::fflush(terminal_);
  shown_ = false;
}

}  // namespace canopy::bench
