#include "transport/tcp/socket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/fd_limit.hpp"

namespace canopy::transport {
namespace {

// Keep-alive probes after 5 s of silence, every 2 s, 5 of them; unacknowledged data gives up after 20 s.
constexpr int kKeepIdleSeconds = 5;
constexpr int kKeepIntervalSeconds = 2;
constexpr int kKeepCount = 5;
constexpr unsigned kUserTimeoutMs = 20'000;

template <typename T>
void set_option(int fd, int level, int name, T value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof(value)) != 0)
    fail_errno(fmt::format("setsockopt({})", what));
}

}  // namespace

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::set_port(std::uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SocketAddress::to_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text, sizeof(text));
    return fmt::format("{}:{}", text, port());
  }
  if (family() == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text, sizeof(text));
    return fmt::format("[{}]:{}", text, port());
  }
  return "(unknown address)";
}

SocketAddress SocketAddress::parse(std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size())
    fail(ErrorCode::Protocol, "'{}' is not an address with a port (host:port or [v6]:port)", text);
  std::string host(text.substr(0, colon));
  std::string port_text(text.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  unsigned long port = std::strtoul(port_text.c_str(), &end, 10);
  if (*end != '\0' || port > 65535) fail(ErrorCode::Protocol, "'{}' has no valid port", text);

  SocketAddress address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    address.length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    address.length = sizeof(sockaddr_in6);
  } else {
    fail(ErrorCode::Protocol, "'{}' is not a numeric IPv4 or IPv6 address", host);
  }
  address.set_port(static_cast<std::uint16_t>(port));
  return address;
}

SocketAddress SocketAddress::local_of(int fd) {
  SocketAddress address;
  address.length = sizeof(address.storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address.storage), &address.length) != 0)
    fail_errno("getsockname");
  return address;
}

SocketAddress SocketAddress::peer_of(int fd) {
  SocketAddress address;
  address.length = sizeof(address.storage);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address.storage), &address.length) != 0) address = {};
  return address;
}

UniqueFd listen_on(const SocketAddress& address, int backlog, std::string_view need) {
  UniqueFd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    const int err = errno;
    fail_descriptor_call(fmt::format("socket() to listen on {}", address.to_string()), err, need);
  }
  if (::bind(fd.get(), address.get(), address.length) != 0)
    fail_errno(fmt::format("bind to {}", address.to_string()));
  if (::listen(fd.get(), backlog) != 0) fail_errno(fmt::format("listen on {}", address.to_string()));
  return fd;
}

UniqueFd start_connect(const SocketAddress& address, int& error, std::string_view need) {
  UniqueFd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    const int err = errno;
    fail_descriptor_call(fmt::format("socket() to connect to {}", address.to_string()), err, need);
  }
  error = ::connect(fd.get(), address.get(), address.length) == 0 ? 0 : errno;
  return fd;
}

void configure_data_socket(int fd) {
  set_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
  set_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
  set_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, kKeepIdleSeconds, "TCP_KEEPIDLE");
  set_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, kKeepIntervalSeconds, "TCP_KEEPINTVL");
  set_option(fd, IPPROTO_TCP, TCP_KEEPCNT, kKeepCount, "TCP_KEEPCNT");
  set_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, kUserTimeoutMs, "TCP_USER_TIMEOUT");
}

}  // namespace canopy::transport
