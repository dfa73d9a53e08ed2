#include "transport/frame.hpp"

#include <fmt/format.h>

#include <iterator>

#include "common/error.hpp"
#include "common/little_endian.hpp"

namespace canopy::transport {
namespace {

// Field offsets; see the layout in frame.hpp.
constexpr std::size_t kMagic = 0, kVersion = 4, kFlags = 5, kCollective = 6, kDtype = 7, kOp = 8,
                      kAlgorithm = 9, kReserved16 = 10, kRoot = 12, kStep = 16, kReserved32 = 20,
                      kCommId = 24, kSeq = 32, kCount = 40, kPayloadBytes = 48;
static_assert(kPayloadBytes + 8 == kFrameHeaderSize);

constexpr std::uint8_t kLastCollective = static_cast<std::uint8_t>(Collective::Scatter);
constexpr std::uint8_t kLastDataType = static_cast<std::uint8_t>(kAllDataTypes[std::size(kAllDataTypes) - 1]);
constexpr std::uint8_t kLastReduceOp = static_cast<std::uint8_t>(kAllReduceOps[std::size(kAllReduceOps) - 1]);

using little_endian::get;
using little_endian::put;

void check_range(const char* field, std::uint8_t value, std::uint8_t last) {
  if (value > last)
    fail(ErrorCode::Protocol, "malformed frame header: {} value {} is out of range (0..{})", field, value,
         last);
}

}  // namespace

FrameBytes encode_frame(const FrameHeader& header) {
  FrameBytes out{};
  const Envelope& e = header.envelope;
  put(&out[kMagic], kFrameMagic);
  put(&out[kVersion], header.version);
  put(&out[kFlags], e.flags);
  put(&out[kCollective], static_cast<std::uint8_t>(e.collective));
  put(&out[kDtype], static_cast<std::uint8_t>(e.dtype));
  put(&out[kOp], static_cast<std::uint8_t>(e.op));
  put(&out[kAlgorithm], e.algorithm);
  put(&out[kRoot], e.root);
  put(&out[kStep], e.step);
  put(&out[kCommId], e.comm_id);
  put(&out[kSeq], e.seq);
  put(&out[kCount], e.count);
  put(&out[kPayloadBytes], header.payload_bytes);
  return out;
}

FrameHeader decode_frame(std::span<const std::byte, kFrameHeaderSize> in) {
  auto magic = get<std::uint32_t>(&in[kMagic]);
  if (magic != kFrameMagic)
    fail(ErrorCode::Protocol,
         "malformed frame header: bad magic 0x{:08x} (expected 0x{:08x}): not a Canopy peer, "
         "or the stream lost its framing",
         magic, kFrameMagic);
  FrameHeader header;
  header.version = get<std::uint8_t>(&in[kVersion]);
  if (header.version != kFrameVersion)
    fail(ErrorCode::Protocol,
         "frame header version {} is not supported (this build speaks version {}): are all "
         "ranks running the same Canopy?",
         header.version, kFrameVersion);
  const auto flags = get<std::uint8_t>(&in[kFlags]);
  if ((flags & ~kKnownFlags) != 0)
    fail(ErrorCode::Protocol,
         "malformed frame header: unknown flags 0x{:02x} (are all ranks running the same Canopy?)",
         flags & ~kKnownFlags);
  if (get<std::uint16_t>(&in[kReserved16]) != 0 || get<std::uint32_t>(&in[kReserved32]) != 0)
    fail(ErrorCode::Protocol, "malformed frame header: reserved bytes are not zero");
  auto collective = get<std::uint8_t>(&in[kCollective]);
  auto dtype = get<std::uint8_t>(&in[kDtype]);
  auto op = get<std::uint8_t>(&in[kOp]);
  check_range("collective", collective, kLastCollective);
  check_range("dtype", dtype, kLastDataType);
  check_range("op", op, kLastReduceOp);

  Envelope& e = header.envelope;
  e.collective = static_cast<Collective>(collective);
  e.dtype = static_cast<DataType>(dtype);
  e.op = static_cast<ReduceOp>(op);
  e.algorithm = get<std::uint8_t>(&in[kAlgorithm]);
  e.root = get<std::uint32_t>(&in[kRoot]);
  e.step = get<std::uint32_t>(&in[kStep]);
  e.comm_id = get<std::uint64_t>(&in[kCommId]);
  e.seq = get<std::uint64_t>(&in[kSeq]);
  e.count = get<std::uint64_t>(&in[kCount]);
  e.flags = flags;
  header.payload_bytes = get<std::uint64_t>(&in[kPayloadBytes]);
  return header;
}

std::string describe_message(const Envelope& envelope, std::uint64_t payload_bytes, bool with_comm) {
  std::string text = describe(envelope);
  if (with_comm) text = fmt::format("comm {} {}", envelope.comm_id, text);
  return fmt::format("{} {} bytes", text, payload_bytes);
}

void check_frame(const FrameHeader& arrived, const Envelope& expected, std::uint64_t expected_bytes,
                 int receiver, int sender) {
  if (same_message(arrived.envelope, expected) && arrived.payload_bytes == expected_bytes) return;
  bool with_comm = arrived.envelope.comm_id != expected.comm_id;
  fail(ErrorCode::Mismatch, "collective mismatch: rank {} expected from rank {}: {}; rank {} sent: {}",
       receiver, sender, describe_message(expected, expected_bytes, with_comm), sender,
       describe_message(arrived.envelope, arrived.payload_bytes, with_comm));
}

}  // namespace canopy::transport
