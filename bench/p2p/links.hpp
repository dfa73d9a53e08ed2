// The two ways the p2p benchmark moves bytes between its two processes: Canopy's transport, and a
// plain blocking TCP socket driven by write()/read() loops (the floor any transport is measured against).
#pragma once

#include <cstddef>
#include <span>

#include "transport/transport.hpp"

namespace canopy::bench {

class Link {
 public:
  virtual ~Link() = default;
  virtual void send(std::span<const std::byte> bytes) = 0;
  virtual void recv(std::span<std::byte> bytes) = 0;
  // Sends and receives at the same time (full duplex) and returns when both are done.
  virtual void exchange(std::span<const std::byte> out, std::span<std::byte> in) = 0;
};

class CanopyLink final : public Link {
 public:
  explicit CanopyLink(transport::Transport& transport) : transport_(transport), peer_(1 - transport.rank()) {}
  void send(std::span<const std::byte> bytes) override;
  void recv(std::span<std::byte> bytes) override;
  void exchange(std::span<const std::byte> out, std::span<std::byte> in) override;

 private:
  transport::Transport& transport_;
  int peer_;
  std::vector<transport::OpId> done_;
};

class PlainSocketLink final : public Link {
 public:
  explicit PlainSocketLink(int fd) : fd_(fd) {}
  void send(std::span<const std::byte> bytes) override;
  void recv(std::span<std::byte> bytes) override;
  void exchange(std::span<const std::byte> out, std::span<std::byte> in) override;

 private:
  int fd_;
};

}  // namespace canopy::bench
