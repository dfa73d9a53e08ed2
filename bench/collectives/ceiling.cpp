#include "bench/collectives/ceiling.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/deadline.hpp"
#include "common/error.hpp"

namespace canopy::bench {
namespace {

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

enum class Outcome { Done, Failed, TimedOut, Closed };

// Sends `out` and receives `in` at the same time on a non-blocking socket. Uses no heap and throws
// nothing: the forked child runs it too.
Outcome exchange(int fd, const std::byte* out, std::byte* in, std::size_t bytes, Deadline deadline) {
  std::size_t sent = 0, received = 0;
  while (sent < bytes || received < bytes) {
    pollfd p{fd, static_cast<short>((received < bytes ? POLLIN : 0) | (sent < bytes ? POLLOUT : 0)), 0};
    int ready = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Outcome::Failed;
    if (ready == 0) return Outcome::TimedOut;
    if ((p.revents & POLLOUT) && sent < bytes) {
      ssize_t n = ::send(fd, out + sent, bytes - sent, MSG_NOSIGNAL);
      if (n > 0)
        sent += static_cast<std::size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR)
        return Outcome::Failed;
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && received < bytes) {
      ssize_t n = ::recv(fd, in + received, bytes - received, 0);
      if (n > 0)
        received += static_cast<std::size_t>(n);
      else if (n == 0)
        return Outcome::Closed;
      else if (errno != EAGAIN && errno != EINTR)
        return Outcome::Failed;
    }
  }
  return Outcome::Done;
}

void make_fast(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

[[noreturn]] void child_main(std::uint16_t port, const std::byte* out, std::byte* in, std::size_t bytes,
                             int rounds, Deadline deadline) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) ::_exit(3);
  make_fast(fd);
  for (int i = 0; i < rounds; ++i)
    if (exchange(fd, out, in, bytes, deadline) != Outcome::Done) ::_exit(4);
  ::_exit(0);
}

int accept_before(int listener, Deadline deadline) {
  pollfd p{listener, POLLIN, 0};
  while (true) {
    int ready = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail_errno("ceiling: poll on the listening socket");
    if (ready == 0)
      fail(ErrorCode::Timeout, "ceiling: the child process did not connect over loopback in time");
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) fail_errno("ceiling: accept");
    return fd;
  }
}

}  // namespace

LoopbackCeiling measure_loopback_ceiling(const CeilingOptions& options) {
  if (options.message_bytes == 0 || options.repetitions < 1)
    fail(ErrorCode::InvalidArgument,
         "ceiling: need a message of at least one byte and one repetition (got {} B, {})",
         options.message_bytes, options.repetitions);
  const Deadline deadline = Deadline::after(options.timeout);
  // Touched before the fork, so neither process pays for fresh pages while timing.
  std::vector<std::byte> out(options.message_bytes, std::byte{1}), in(options.message_bytes, std::byte{0});

  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener.get() < 0 ||
      ::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    fail_errno("ceiling: listening on 127.0.0.1");

  const int rounds = options.repetitions + 1;
  pid_t child = ::fork();
  if (child < 0) fail_errno("ceiling: fork");
  if (child == 0) child_main(ntohs(address.sin_port), out.data(), in.data(), out.size(), rounds, deadline);

  std::vector<double> seconds;
  Outcome outcome = Outcome::Done;
  try {
    Fd peer(accept_before(listener.get(), deadline));
    make_fast(peer.get());
    for (int i = 0; i < rounds && outcome == Outcome::Done; ++i) {
      auto start = Clock::now();
      outcome = exchange(peer.get(), out.data(), in.data(), out.size(), deadline);
      if (i > 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
  } catch (...) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    throw;
  }
  if (outcome != Outcome::Done) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (outcome == Outcome::TimedOut)
    fail(ErrorCode::Timeout, "ceiling: the loopback exchange did not finish within {} s",
         options.timeout.count());
  if (outcome != Outcome::Done || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail(ErrorCode::PeerFailed, "ceiling: the loopback exchange failed ({}; child wait status {})",
         outcome == Outcome::Closed ? "the child closed the connection" : "a socket call failed", status);

  std::sort(seconds.begin(), seconds.end());
  LoopbackCeiling ceiling;
  const double bytes = static_cast<double>(options.message_bytes);
  ceiling.each_way_gbps = bytes / seconds[seconds.size() / 2] / 1e9;
  ceiling.best_each_way_gbps = bytes / seconds.front() / 1e9;
  return ceiling;
}

double ceiling_busbw_gbps(Collective collective, int ranks, double aggregate_gbps) {
  if (ranks < 2 || aggregate_gbps <= 0) return 0;
  const double p = ranks;
  switch (collective) {
    case Collective::AllReduce:
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return aggregate_gbps / p;
    case Collective::Broadcast:
    case Collective::Reduce:
      return aggregate_gbps / (p - 1);
    case Collective::Gather:  // (p-1)/p of the bytes cross, all through the root
    case Collective::Scatter:
      return aggregate_gbps;
    default:
      return 0;
  }
}

}  // namespace canopy::bench
