#include "bench/elastic/rank_processes.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

namespace canopy::bench {

double now_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

void write_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
}

RankProcesses::RankProcesses(int count, const std::function<void(int, int)>& body) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  read_fd_ = fds[0];
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      body(i, fds[1]);
      std::_Exit(0);
    }
    pids_.push_back(pid);
  }
  ::close(fds[1]);  // the children hold the only write ends: end of stream once they have all ended
  signals_.assign(pids_.size(), 0);
  exit_codes_.assign(pids_.size(), -1);
  reaped_.assign(pids_.size(), false);
}

RankProcesses::~RankProcesses() {
  reap(now_seconds());
  ::close(read_fd_);
}

std::optional<std::string> RankProcesses::next_line(double until) {
  for (;;) {
    if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    const double left = until - now_seconds();
    if (left <= 0) return std::nullopt;
    pollfd watch{read_fd_, POLLIN, 0};
    if (::poll(&watch, 1, static_cast<int>(std::ceil(left * 1000))) <= 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(read_fd_, chunk, sizeof chunk);
    if (got <= 0) return std::nullopt;  // every child has ended
    buffer_.append(chunk, static_cast<std::size_t>(got));
  }
}

void RankProcesses::kill(int index, int signal_number) {
  if (!reaped_[static_cast<std::size_t>(index)])
    ::kill(pids_[static_cast<std::size_t>(index)], signal_number);
}

std::vector<int> RankProcesses::reap(double until) {
  auto take = [this](std::size_t i, int flags) {
    int status = 0;
    const pid_t done = ::waitpid(pids_[i], &status, flags);
    if (done == 0) return;
    reaped_[i] = true;
    if (done < 0) return;
    if (WIFSIGNALED(status)) signals_[i] = WTERMSIG(status);
    if (WIFEXITED(status)) exit_codes_[i] = WEXITSTATUS(status);
  };
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    while (!reaped_[i] && now_seconds() < until) {
      take(i, WNOHANG);
      if (!reaped_[i]) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::vector<int> hung;
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    if (reaped_[i]) continue;
    take(i, WNOHANG);  // it may have ended just now
    if (reaped_[i]) continue;
    hung.push_back(static_cast<int>(i));
    ::kill(pids_[i], SIGKILL);
    take(i, 0);
  }
  return hung;
}

}  // namespace canopy::bench
