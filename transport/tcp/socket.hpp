// Thin, exception-safe wrappers over the BSD socket calls the TCP transport needs.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace canopy::transport {

// Owns a file descriptor; closes it once.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address, printed and parsed as "127.0.0.1:41235" or "[::1]:41235".
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  std::uint16_t port() const;
  void set_port(std::uint16_t port);
  std::string to_string() const;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }

  // Throws Error(Protocol) naming the text when it is not an address with a port.
  static SocketAddress parse(std::string_view text);
  static SocketAddress local_of(int fd);  // getsockname
  static SocketAddress peer_of(int fd);   // getpeername; family 0 when the socket has no peer
};

// Whether a non-blocking call's errno says only that it would have to wait.
inline bool would_block(int error) {
  return error == EAGAIN || error == EWOULDBLOCK;
}

// A listening socket bound to `address` (port 0 picks one), non-blocking. Out of descriptors it throws
// Error(Resource), naming `need` (what the caller holds open, common/fd_limit.hpp).
UniqueFd listen_on(const SocketAddress& address, int backlog, std::string_view need = {});

// A non-blocking TCP socket of the address's family, with connect() started.
// Returns the errno of connect() in `error` (0 or EINPROGRESS when under way). Out of descriptors it
// throws Error(Resource), naming `need`.
UniqueFd start_connect(const SocketAddress& address, int& error, std::string_view need = {});

// TCP_NODELAY, keep-alive with short timers and TCP_USER_TIMEOUT, so that a dead or silent peer turns into
// an error instead of a hang. The buffer sizes are left to kernel autotuning on purpose (REFERENCES.md).
void configure_data_socket(int fd);

}  // namespace canopy::transport
