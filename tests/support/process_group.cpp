#include "tests/support/process_group.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace canopy::testing {
namespace {

void write_line(int fd, const std::string& line) {
  std::string text = line + "\n";
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone: nobody to tell
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void Reporter::ready(const std::string& detail) const {
  write_line(fd_, "ready " + detail);
}
void Reporter::outcome(const std::string& line) const {
  write_line(fd_, "outcome " + line);
}

std::string ProcessEnd::describe() const {
  std::string how = timed_out     ? "timed out (killed by the harness)"
                    : !ended      ? "still running"
                    : signal != 0 ? fmt::format("killed by signal {} ({})", signal, strsignal(signal))
                                  : fmt::format("exited with status {}", exit_code);
  return outcome.empty() ? how : fmt::format("{}: {}", how, outcome);
}

ProcessGroup::ProcessGroup(int n, const std::function<void(int index, const Reporter& reporter)>& body)
    : pids_(n, -1), pipes_(n, -1), buffers_(n), ends_(n) {
  std::fflush(nullptr);
  for (int index = 0; index < n; ++index) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error(fmt::format("pipe2: {}", std::strerror(errno)));
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
      ::close(fds[0]);
      for (int other : pipes_)
        if (other >= 0) ::close(other);
      Reporter reporter(fds[1]);
      int status = 0;
      try {
        body(index, reporter);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[process %d] failed: %s\n", index, e.what());
        reporter.outcome(fmt::format("exception {}", e.what()));
        status = 1;
      } catch (...) {
        std::fprintf(stderr, "[process %d] failed with an unknown exception\n", index);
        reporter.outcome("exception (not a std::exception)");
        status = 1;
      }
      std::fflush(nullptr);
      _exit(status);  // no destructors of the parent's objects (gtest's, the group's) in the child
    }
    ::close(fds[1]);
    pids_[index] = pid;
    pipes_[index] = fds[0];
  }
}

ProcessGroup::~ProcessGroup() {
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] > 0 && !ends_[i].ended) {
      ::kill(pids_[i], SIGKILL);
      ::waitpid(pids_[i], nullptr, 0);
    }
    if (pipes_[i] >= 0) ::close(pipes_[i]);
  }
}

void ProcessGroup::signal(int index, int signal_number) {
  // A reaped child's pid may already belong to another process.
  if (!ends_[index].ended) ::kill(pids_[index], signal_number);
}

void ProcessGroup::kill_unfinished() {
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    if (ends_[i].ended) continue;
    ::kill(pids_[i], SIGKILL);
    ends_[i].timed_out = true;
  }
  wait_ended_all();
}

void ProcessGroup::wait_ended_all() {
  std::vector<int> all(pids_.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  wait_ended(all, Clock::time_point::max());
}

void ProcessGroup::pump(Clock::time_point until) {
  std::vector<pollfd> fds;
  std::vector<int> owners;
  for (std::size_t i = 0; i < pipes_.size(); ++i) {
    if (pipes_[i] < 0) continue;
    fds.push_back({pipes_[i], POLLIN, 0});
    owners.push_back(static_cast<int>(i));
  }
  // Children are reaped with waitpid(WNOHANG) between short poll() slices: a child that stopped
  // writing is noticed within one slice of its exit.
  auto now = Clock::now();
  int wait_ms = 0;
  if (until > now)
    wait_ms = static_cast<int>(std::min<long long>(
        5, std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1));
  if (!fds.empty()) {
    if (::poll(fds.data(), fds.size(), wait_ms) > 0) {
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        int i = owners[k];
        char chunk[4096];
        ssize_t n = ::read(pipes_[i], chunk, sizeof chunk);
        if (n > 0) {
          buffers_[i].append(chunk, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          ::close(pipes_[i]);
          pipes_[i] = -1;
        }
        take_lines(i);
      }
    }
  } else if (wait_ms > 0) {
    ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
  }
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    if (ends_[i].ended) continue;
    int status = 0;
    if (::waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
    // Drain what the child wrote just before it exited.
    while (pipes_[i] >= 0) {
      char chunk[4096];
      ssize_t n = ::read(pipes_[i], chunk, sizeof chunk);
      if (n <= 0) {
        ::close(pipes_[i]);
        pipes_[i] = -1;
        break;
      }
      buffers_[i].append(chunk, static_cast<std::size_t>(n));
    }
    take_lines(static_cast<int>(i));
    ends_[i].ended = true;
    ends_[i].ended_at = Clock::now();
    if (WIFEXITED(status)) ends_[i].exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) ends_[i].signal = WTERMSIG(status);
  }
}

void ProcessGroup::take_lines(int i) {
  for (std::size_t eol; (eol = buffers_[i].find('\n')) != std::string::npos;) {
    std::string line = buffers_[i].substr(0, eol);
    buffers_[i].erase(0, eol + 1);
    if (line.rfind("ready ", 0) == 0) {
      ends_[i].ready = true;
      ends_[i].ready_at = Clock::now();
      ends_[i].ready_detail = line.substr(6);
    } else if (line.rfind("outcome ", 0) == 0) {
      ends_[i].outcome = line.substr(8);
    }
  }
}

bool ProcessGroup::wait_ready(const std::vector<int>& indices, Clock::time_point deadline) {
  for (;;) {
    bool all = true;
    for (int i : indices) all = all && (ends_[i].ready || ends_[i].ended);
    if (all) return true;
    if (Clock::now() >= deadline) return false;
    pump(deadline);
  }
}

bool ProcessGroup::wait_ended(const std::vector<int>& indices, Clock::time_point deadline) {
  for (;;) {
    bool all = true;
    for (int i : indices) all = all && ends_[i].ended;
    if (all) return true;
    if (Clock::now() >= deadline) return false;
    pump(deadline);
  }
}

}  // namespace canopy::testing
