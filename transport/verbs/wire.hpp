// What verbs ranks tell each other: the queue-pair address published in the store at set-up, and the
// small control messages sent over the connected queue pairs. Both little-endian and versioned, so
// that ranks of two different builds fail with a clear error instead of misreading each other.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "transport/frame.hpp"

namespace canopy::transport::verbs {

inline constexpr std::uint16_t kAddressVersion = 1;

// One end of a reliable-connected queue pair, as its owner publishes it for one peer.
struct QpAddress {
  std::uint16_t lid = 0;  // InfiniBand only; 0 on RoCE
  std::uint32_t qp_number = 0;
  std::uint32_t packet_sequence = 0;  // the first PSN this end sends
  std::uint8_t port = 1;
  std::uint8_t mtu = 0;   // enum ibv_mtu: 1 = 256 ... 5 = 4096
  bool ethernet = false;  // RoCE: addressed by GID, not LID
  std::uint8_t gid_index = 0;
  std::array<std::uint8_t, 16> gid{};
  std::uint32_t receive_slots = 0;  // receives it keeps posted: the credits the other end starts with

  friend bool operator==(const QpAddress&, const QpAddress&) = default;
};

std::string encode_address(const QpAddress& address);
// Throws Error(Protocol) naming `who` when the bytes are not a version-1 address.
QpAddress decode_address(std::string_view bytes, std::string_view who);

enum class ControlType : std::uint8_t {
  ClearToSend = 1,  // "write your message #seq here": address, rkey and the receive's frame header
  Mismatch = 2,     // "your clear-to-send #seq does not match my message": the sender's frame header
  Credit = 3,       // only returns credits
  ReadyToSend = 4,  // "read my message #seq from here" (a send copied aside): address, rkey, its frame header
  ReadDone = 5,     // "I have read your message #seq": the sender may reuse that memory
};

// Whether a control message of this type carries a frame header.
inline bool carries_frame(ControlType type) {
  return type == ControlType::ClearToSend || type == ControlType::Mismatch ||
         type == ControlType::ReadyToSend;
}

struct ControlMessage {
  ControlType type = ControlType::Credit;
  std::uint16_t credits = 0;  // receives reposted since the last message in this direction
  std::uint32_t seq = 0;      // the message number on this peer pair, per direction
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  FrameHeader frame;  // ClearToSend, Mismatch and ReadyToSend only

  friend bool operator==(const ControlMessage&, const ControlMessage&) = default;
};

inline constexpr std::size_t kControlMessageSize = 24 + kFrameHeaderSize;

void encode_control(const ControlMessage& message, std::span<std::byte, kControlMessageSize> out);
// Throws Error(Protocol) when the bytes are not a control message this build understands.
ControlMessage decode_control(std::span<const std::byte> bytes);

}  // namespace canopy::transport::verbs
