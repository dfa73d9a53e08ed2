// The frame header decoder and the mismatch check (transport/frame.hpp) on arbitrary bytes.
// Input: 56 header bytes, then 56 more that describe the receive that was posted.
// Properties: decoding refuses only with Error(Protocol); a decoded header encodes back to the same
// bytes; the check against a posted receive passes exactly when envelope (but for its flags) and size agree,
// and otherwise fails only with Error(Mismatch).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz/fuzz_check.hpp"
#include "transport/frame.hpp"

using canopy::Error;
using canopy::ErrorCode;
using canopy::fuzz::check;
using canopy::transport::decode_frame;
using canopy::transport::FrameBytes;
using canopy::transport::FrameHeader;
using canopy::transport::kFrameHeaderSize;

namespace {

bool decode(const std::byte* bytes, FrameHeader& header) {
  try {
    header = decode_frame(std::span<const std::byte, kFrameHeaderSize>(bytes, kFrameHeaderSize));
    return true;
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Protocol, "decode_frame");
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kFrameHeaderSize) return 0;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  FrameHeader arrived;
  if (!decode(bytes, arrived)) return 0;

  FrameBytes again = canopy::transport::encode_frame(arrived);
  check(std::memcmp(again.data(), bytes, kFrameHeaderSize) == 0,
        "a decoded frame does not encode back to its bytes");
  check(!canopy::transport::describe_message(arrived.envelope, arrived.payload_bytes, true).empty(),
        "describe_message is empty");

  // The posted receive: a second valid header when there is one, else the arrived one itself.
  FrameHeader expected = arrived;
  if (size >= 2 * kFrameHeaderSize && !decode(bytes + kFrameHeaderSize, expected)) return 0;
  // Flags are never matched (transport/envelope.hpp).
  bool agree = canopy::transport::same_message(expected.envelope, arrived.envelope) &&
               expected.payload_bytes == arrived.payload_bytes;
  try {
    canopy::transport::check_frame(arrived, expected.envelope, expected.payload_bytes, 0, 1);
    check(agree, "check_frame accepted a header that differs from the posted receive");
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Mismatch, "check_frame");
    check(!agree, "check_frame refused a header equal to the posted receive");
  }
  return 0;
}
