// A blocking TCP connection for store clients, where every call is bounded by a deadline: a dead or
// silent server becomes an Error naming host:port, never a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/deadline.hpp"

namespace canopy::rendezvous {

class ClientSocket {
 public:
  // Resolves `host` (name, IPv4 or IPv6 literal) and connects, retrying with backoff until `deadline`:
  // the server may start after its clients. Throws Error(Timeout) naming host:port and the last error.
  static ClientSocket connect(const std::string& host, std::uint16_t port, Deadline deadline);

  ClientSocket(ClientSocket&& other) noexcept;
  ClientSocket& operator=(ClientSocket&& other) noexcept;
  ~ClientSocket();

  // Throw Error(Timeout) when the deadline passes, Error(PeerFailed) when the peer closes or resets.
  void send_all(std::string_view bytes, Deadline deadline);
  void receive_exact(char* into, std::size_t size, Deadline deadline);

  // True once bytes (or the peer's close) wait to be received; false when the deadline passed first.
  bool wait_readable(Deadline deadline);

  const std::string& endpoint() const { return endpoint_; }  // "host:port", for messages
  void close();
  // Ends the connection for every thread blocked on it (they see the peer's close), keeping the descriptor
  // until close() or destruction, so that no other thread's call lands on a reused one.
  void shutdown();

 private:
  ClientSocket(int fd, std::string endpoint) : fd_(fd), endpoint_(std::move(endpoint)) {}
  // Waits until the socket is ready for `events`; false when the deadline passed first.
  bool wait_ready(short events, Deadline deadline);

  int fd_ = -1;
  std::string endpoint_;
};

// True when a connected TCP socket's two ends are one address and port. A connect to a local port in the
// ephemeral range where nothing listens yet may be given that very port as its source, and TCP's
// simultaneous open then joins the socket to itself: the client would read its own requests back, and the
// rank that hosts the store could never bind the port. ClientSocket::connect, and the TCP transport's dial
// to a peer (transport/tcp/tcp_connector.cpp), retry such a socket like a refusal.
bool connected_to_itself(int fd);

}  // namespace canopy::rendezvous
