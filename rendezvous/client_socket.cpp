#include "rendezvous/client_socket.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"

namespace canopy::rendezvous {
namespace {

// One unreachable address (a black-holed IPv6 route) must not eat the whole connect deadline.
constexpr auto kPerAddressConnectLimit = std::chrono::milliseconds(2000);
constexpr auto kFirstBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxBackoff = std::chrono::milliseconds(500);

std::string format_endpoint(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

// Tries one resolved address; returns the connected descriptor or -1 with `error` set.
int try_connect(const addrinfo& address, Deadline deadline, std::string& error) {
  int fd =
      ::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, address.ai_protocol);
  if (fd < 0) {
    const int err = errno;
    if (out_of_descriptors(err)) fail_descriptor_call("TcpStore client: socket() to reach the store", err);
    error = fmt::format("socket(): {}", std::strerror(err));
    return -1;
  }
  int rc = ::connect(fd, address.ai_addr, address.ai_addrlen);
  if (rc != 0 && errno != EINPROGRESS) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    auto limit = deadline.earlier(Deadline::after(kPerAddressConnectLimit));
    int ready = 0;
    do {
      ready = ::poll(&p, 1, limit.poll_timeout_ms());
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) {
      error = ready == 0 ? "connect timed out" : std::strerror(errno);
      ::close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t length = sizeof(so_error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &length);
    if (so_error != 0) {
      error = std::strerror(so_error);
      ::close(fd);
      return -1;
    }
  }
  if (connected_to_itself(fd)) {
    error = "connected to itself (nothing listens there yet)";
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

bool connected_to_itself(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_length = sizeof(local);
  socklen_t peer_length = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) return false;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) return false;
  if (local.ss_family != peer.ss_family) return false;
  if (local.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(local);
    const auto& b = reinterpret_cast<const sockaddr_in&>(peer);
    return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
  }
  if (local.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(local);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(peer);
    return a.sin6_port == b.sin6_port && std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof(a.sin6_addr)) == 0;
  }
  return false;
}

ClientSocket ClientSocket::connect(const std::string& host, std::uint16_t port, Deadline deadline) {
  std::string endpoint = format_endpoint(host, port);
  auto start = Clock::now();
  auto backoff = kFirstBackoff;
  std::string last_error;
  int attempts = 0;
  for (;;) {
    ++attempts;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      last_error = fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc));
    } else {
      for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
        int fd = try_connect(*address, deadline, last_error);
        if (fd >= 0) {
          ::freeaddrinfo(found);
          if (attempts > 1) log::debug("connected to TcpStore at {} after {} attempts", endpoint, attempts);
          return ClientSocket(fd, endpoint);
        }
      }
      ::freeaddrinfo(found);
    }
    if (deadline.expired()) break;
    auto pause = std::min<Clock::duration>(backoff, deadline.remaining());
    std::this_thread::sleep_for(pause);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  fail(ErrorCode::Timeout,
       "could not connect to the TcpStore at {} within {} ms ({} attempts; last error: {}); is the rank or "
       "launcher that hosts it running, and are MASTER_ADDR/MASTER_PORT right?",
       endpoint, waited.count(), attempts, last_error);
}

ClientSocket::ClientSocket(ClientSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), endpoint_(std::move(other.endpoint_)) {}

ClientSocket& ClientSocket::operator=(ClientSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    endpoint_ = std::move(other.endpoint_);
  }
  return *this;
}

ClientSocket::~ClientSocket() {
  close();
}

void ClientSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ClientSocket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

bool ClientSocket::wait_readable(Deadline deadline) {
  if (fd_ < 0) fail(ErrorCode::PeerFailed, "the connection to the TcpStore at {} is closed", endpoint_);
  return wait_ready(POLLIN, deadline);
}

bool ClientSocket::wait_ready(short events, Deadline deadline) {
  pollfd p{fd_, events, 0};
  for (;;) {
    int ready = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) fail_errno(fmt::format("poll() on the TcpStore connection to {}", endpoint_));
  }
}

void ClientSocket::send_all(std::string_view bytes, Deadline deadline) {
  if (fd_ < 0) fail(ErrorCode::PeerFailed, "the connection to the TcpStore at {} is closed", endpoint_);
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(POLLOUT, deadline))
        fail(ErrorCode::Timeout, "sending to the TcpStore at {} timed out ({} bytes left)", endpoint_,
             bytes.size());
      continue;
    }
    fail(ErrorCode::PeerFailed, "the TcpStore at {} failed while we sent to it: {}", endpoint_,
         std::strerror(errno));
  }
}

void ClientSocket::receive_exact(char* into, std::size_t size, Deadline deadline) {
  if (fd_ < 0) fail(ErrorCode::PeerFailed, "the connection to the TcpStore at {} is closed", endpoint_);
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd_, into + done, size - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0)
      fail(ErrorCode::PeerFailed,
           "the TcpStore at {} closed the connection (the server stopped or dropped us)", endpoint_);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(POLLIN, deadline))
        fail(ErrorCode::Timeout, "no answer from the TcpStore at {} before the deadline", endpoint_);
      continue;
    }
    fail(ErrorCode::PeerFailed, "the TcpStore at {} failed while we received from it: {}", endpoint_,
         std::strerror(errno));
  }
}

}  // namespace canopy::rendezvous
