// The frames of the point-to-point protocol (collectives/p2p/point_to_point.hpp). Every message between two
// ranks starts with a descriptor of fixed size, so the receiver always knows what the next frame is:
//
//   Eager(tag, bytes, id)          the payload follows at once (messages up to the eager limit)
//   RequestToSend(tag, bytes, id)  a larger message waits for its receive to be posted...
//   ClearToSend(id)                ...which the receiver answers with this...
//   Data(id, bytes)                ...and the payload follows this.
//
// Layout (32 bytes, little-endian): u8 kind, 3 bytes zero, u32 tag, u64 bytes, u64 id, u64 zero.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace canopy::collectives {

enum class P2PKind : std::uint8_t { Eager = 1, RequestToSend = 2, ClearToSend = 3, Data = 4 };

struct P2PDescriptor {
  P2PKind kind = P2PKind::Eager;
  std::uint32_t tag = 0;
  std::uint64_t bytes = 0;  // of the payload (Eager, RequestToSend, Data)
  std::uint64_t id = 0;     // the sender's number for the message toward this peer

  bool has_payload() const { return (kind == P2PKind::Eager || kind == P2PKind::Data) && bytes > 0; }
  friend bool operator==(const P2PDescriptor&, const P2PDescriptor&) = default;
};

inline constexpr std::size_t kP2PDescriptorBytes = 32;
using P2PDescriptorBytes = std::array<std::byte, kP2PDescriptorBytes>;

P2PDescriptorBytes encode(const P2PDescriptor& descriptor);
// Throws Error(Protocol) naming the sender for an unknown kind or nonzero reserved bytes.
P2PDescriptor decode_descriptor(std::span<const std::byte, kP2PDescriptorBytes> bytes, int sender);

}  // namespace canopy::collectives
