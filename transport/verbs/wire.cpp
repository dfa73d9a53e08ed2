#include "transport/verbs/wire.hpp"

#include <cstring>

#include "common/error.hpp"
#include "common/little_endian.hpp"

namespace canopy::transport::verbs {
namespace {

constexpr std::uint8_t kControlVersion = 1;
constexpr std::size_t kAddressSize = 2 + 2 + 4 + 4 + 1 + 1 + 1 + 1 + 16 + 4;

using little_endian::get;
using little_endian::put;

}  // namespace

// Layout: u16 version, u16 lid, u32 qpn, u32 psn, u8 port, u8 mtu, u8 ethernet, u8 gid_index,
// 16 bytes gid, u32 receive_slots.
std::string encode_address(const QpAddress& a) {
  std::string bytes(kAddressSize, '\0');
  auto* out = reinterpret_cast<std::byte*>(bytes.data());
  put(out + 0, kAddressVersion);
  put(out + 2, a.lid);
  put(out + 4, a.qp_number);
  put(out + 8, a.packet_sequence);
  put(out + 12, a.port);
  put(out + 13, a.mtu);
  put(out + 14, static_cast<std::uint8_t>(a.ethernet ? 1 : 0));
  put(out + 15, a.gid_index);
  std::memcpy(out + 16, a.gid.data(), 16);
  put(out + 32, a.receive_slots);
  return bytes;
}

QpAddress decode_address(std::string_view bytes, std::string_view who) {
  const auto* in = reinterpret_cast<const std::byte*>(bytes.data());
  if (bytes.size() >= 2 && get<std::uint16_t>(in) != kAddressVersion)
    fail(ErrorCode::Protocol,
         "{} published a verbs queue-pair address of version {}; this build speaks version {}: are all "
         "ranks running the same Canopy?",
         who, get<std::uint16_t>(in), kAddressVersion);
  if (bytes.size() != kAddressSize)
    fail(ErrorCode::Protocol, "{} published a verbs queue-pair address of {} bytes; expected {}", who,
         bytes.size(), kAddressSize);
  QpAddress a;
  a.lid = get<std::uint16_t>(in + 2);
  a.qp_number = get<std::uint32_t>(in + 4);
  a.packet_sequence = get<std::uint32_t>(in + 8);
  a.port = get<std::uint8_t>(in + 12);
  a.mtu = get<std::uint8_t>(in + 13);
  std::uint8_t ethernet = get<std::uint8_t>(in + 14);
  a.gid_index = get<std::uint8_t>(in + 15);
  std::memcpy(a.gid.data(), in + 16, 16);
  a.receive_slots = get<std::uint32_t>(in + 32);
  if (ethernet > 1 || a.mtu < 1 || a.mtu > 5 || a.receive_slots < 2 || a.port == 0)
    fail(ErrorCode::Protocol,
         "{} published a malformed verbs queue-pair address (mtu {}, port {}, {} receive slots)", who, a.mtu,
         a.port, a.receive_slots);
  a.ethernet = ethernet == 1;
  return a;
}

// Layout: u8 version, u8 type, u16 credits, u32 seq, u64 address, u32 rkey, u32 reserved (0),
// then the 56-byte frame header (zeros for Credit and ReadDone).
void encode_control(const ControlMessage& m, std::span<std::byte, kControlMessageSize> out) {
  std::memset(out.data(), 0, out.size());
  put(out.data() + 0, kControlVersion);
  put(out.data() + 1, static_cast<std::uint8_t>(m.type));
  put(out.data() + 2, m.credits);
  put(out.data() + 4, m.seq);
  put(out.data() + 8, m.address);
  put(out.data() + 16, m.rkey);
  if (carries_frame(m.type)) {
    FrameBytes frame = encode_frame(m.frame);
    std::memcpy(out.data() + 24, frame.data(), frame.size());
  }
}

ControlMessage decode_control(std::span<const std::byte> bytes) {
  if (bytes.size() != kControlMessageSize)
    fail(ErrorCode::Protocol, "verbs control message of {} bytes; expected {}", bytes.size(),
         kControlMessageSize);
  const std::byte* in = bytes.data();
  if (get<std::uint8_t>(in) != kControlVersion)
    fail(ErrorCode::Protocol, "verbs control message of version {}; this build speaks version {}",
         get<std::uint8_t>(in), kControlVersion);
  ControlMessage m;
  auto type = get<std::uint8_t>(in + 1);
  if (type < 1 || type > 5 || get<std::uint32_t>(in + 20) != 0)
    fail(ErrorCode::Protocol, "malformed verbs control message (type {})", type);
  m.type = static_cast<ControlType>(type);
  m.credits = get<std::uint16_t>(in + 2);
  m.seq = get<std::uint32_t>(in + 4);
  m.address = get<std::uint64_t>(in + 8);
  m.rkey = get<std::uint32_t>(in + 16);
  if (carries_frame(m.type)) m.frame = decode_frame(bytes.subspan(24).first<kFrameHeaderSize>());
  return m;
}

}  // namespace canopy::transport::verbs
