#include "tests/support/store_server_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "canopy/store.hpp"

namespace canopy::testing {
namespace {

// The child: serve until killed. Its port goes up the pipe as text; a failure to start, as "error ...".
[[noreturn]] void serve(int report_fd, const std::string& job_token, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(1);  // the test died before the line above took effect
  std::string report;
  try {
    // Leaked on purpose: the process ends by SIGKILL, never by returning.
    auto* server = new TcpStoreServer("127.0.0.1", 0, job_token);
    report = std::to_string(server->port()) + "\n";
  } catch (const std::exception& e) {
    report = std::string("error ") + e.what() + "\n";
  }
  if (::write(report_fd, report.data(), report.size()) != static_cast<ssize_t>(report.size())) _exit(1);
  ::close(report_fd);
  for (;;) ::pause();
}

}  // namespace

StoreServerProcess::StoreServerProcess(const std::string& job_token, std::chrono::milliseconds start_limit) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("StoreServerProcess: pipe failed");
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("StoreServerProcess: fork failed");
  if (pid_ == 0) {
    ::close(fds[0]);
    serve(fds[1], job_token, parent);
  }
  ::close(fds[1]);
  std::string report;
  pollfd ready{fds[0], POLLIN, 0};
  char buffer[512];
  while (report.find('\n') == std::string::npos &&
         ::poll(&ready, 1, static_cast<int>(start_limit.count())) == 1) {
    ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    report.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (!report.empty() && report.front() >= '0' && report.front() <= '9') {
    port_ = static_cast<std::uint16_t>(std::stoi(report));
    return;
  }
  stop();
  throw std::runtime_error(
      fmt::format("StoreServerProcess: the server did not start: {}", report.empty() ? "no word" : report));
}

StoreServerProcess::~StoreServerProcess() {
  stop();
}

void StoreServerProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace canopy::testing
