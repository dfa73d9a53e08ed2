// The header in front of every message on the wire: fixed size, little-endian, versioned. It carries
// the whole Envelope, so the receiver can refuse a message from a rank that called another collective
// (or another size, type, root...) before a single payload byte reaches the destination.
//
// Layout (56 bytes, all integers little-endian):
//   0  u32 magic "CNPY"     4  u8 version      5  u8 the envelope's flags (kKnownFlags; the rest must be 0)
//   6  u8 collective        7  u8 dtype        8  u8 op          9  u8 algorithm
//  10  u16 reserved (0)    12  u32 root       16  u32 step      20  u32 reserved (0)
//  24  u64 comm_id         32  u64 seq        40  u64 count     48  u64 payload_bytes
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "transport/envelope.hpp"

namespace canopy::transport {

inline constexpr std::uint32_t kFrameMagic = 0x59504E43;  // "CNPY" in memory order
inline constexpr std::uint8_t kFrameVersion = 1;
inline constexpr std::size_t kFrameHeaderSize = 56;

struct FrameHeader {
  std::uint8_t version = kFrameVersion;
  Envelope envelope;
  std::uint64_t payload_bytes = 0;

  friend bool operator==(const FrameHeader&, const FrameHeader&) = default;
};

using FrameBytes = std::array<std::byte, kFrameHeaderSize>;

FrameBytes encode_frame(const FrameHeader& header);

// Throws Error(Protocol) saying what is wrong: bad magic, unknown version or flags, an enum value out
// of range, nonzero reserved bytes.
FrameHeader decode_frame(std::span<const std::byte, kFrameHeaderSize> bytes);

// "all_reduce #5 (float32 sum, 1000 elements, algorithm 0, root 0, step 0) 4000 bytes", with the
// communicator id in front when `with_comm` (used when the two sides differ in it).
std::string describe_message(const Envelope& envelope, std::uint64_t payload_bytes, bool with_comm = false);

// Checks a header that arrived from `sender` at `receiver` against the receive that was posted.
// Throws Error(Mismatch) naming both sides when the envelopes or the byte counts differ.
void check_frame(const FrameHeader& arrived, const Envelope& expected, std::uint64_t expected_bytes,
                 int receiver, int sender);

}  // namespace canopy::transport
