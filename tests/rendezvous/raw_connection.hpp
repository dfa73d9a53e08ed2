// A hand-driven loopback connection to a TcpStore server, to send what no well-behaved client would.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/deadline.hpp"
#include "rendezvous/store_protocol.hpp"

namespace canopy::testing {

class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0)
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
  ~RawConnection() { ::close(fd_); }

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may have closed already: what it answered is checked
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  void hello(std::string_view token = "tok") {
    send(rendezvous::protocol::encode_hello(token));
    EXPECT_EQ(receive(1, std::chrono::seconds(2)), std::string(1, '\0'));
  }
  // Up to `size` bytes, or fewer when the server closes or the time runs out.
  std::string receive(std::size_t size, std::chrono::milliseconds within) {
    std::string out;
    auto deadline = Clock::now() + within;
    while (out.size() < size && Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) break;
      char buffer[4096];
      ssize_t n = ::recv(fd_, buffer, std::min(sizeof(buffer), size - out.size()), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }
  // True when the server closes the connection within the time.
  bool closed_by_server(std::chrono::milliseconds within) {
    while (!closed_) {
      if (receive(1 << 20, within).empty() && !closed_) return false;
    }
    return true;
  }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

}  // namespace canopy::testing
