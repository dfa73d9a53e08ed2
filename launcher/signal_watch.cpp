#include "launcher/signal_watch.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.hpp"

namespace canopy::launcher {

SignalWatch::SignalWatch() {
  sigemptyset(&watched_);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&watched_, s);
  if (int err = pthread_sigmask(SIG_BLOCK, &watched_, &previous_mask_); err != 0) {
    fail_errno("cannot block signals for the launcher", err);
  }
  fd_ = signalfd(-1, &watched_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    fail_errno("cannot create a signalfd for the launcher", err);
  }
}

SignalWatch::~SignalWatch() {
  ::close(fd_);
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

std::vector<int> SignalWatch::take() {
  std::vector<int> signals;
  signalfd_siginfo info{};
  while (true) {
    ssize_t n = ::read(fd_, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) {
      signals.push_back(static_cast<int>(info.ssi_signo));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return signals;  // EAGAIN: nothing more pending
  }
}

}  // namespace canopy::launcher
