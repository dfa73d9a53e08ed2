#include "transport/tcp/handshake.hpp"

#include <cstring>

#include "common/error.hpp"
#include "common/little_endian.hpp"

namespace canopy::transport {
namespace {

using little_endian::get;
using little_endian::put;

}  // namespace

std::string_view to_string(AckStatus status) {
  switch (status) {
    case AckStatus::Accepted:
      return "accepted";
    case AckStatus::WrongToken:
      return "wrong job token";
    case AckStatus::WrongComm:
      return "wrong communicator id";
    case AckStatus::BadRank:
      return "rank out of range or not expected on this side";
    case AckStatus::Duplicate:
      return "a connection from this rank already exists";
    case AckStatus::OtherUser:
      return "the connecting process runs as another user";
    case AckStatus::NoSuchMesh:
      return "no mesh of that number listens there";
  }
  return "unknown status";
}

std::vector<std::byte> encode_hello(const Hello& hello, std::string_view token) {
  if (token.size() > kMaxTokenBytes)
    fail(ErrorCode::InvalidArgument, "CANOPY_JOB_TOKEN is {} bytes long; at most {} are allowed",
         token.size(), kMaxTokenBytes);
  std::vector<std::byte> out(kHelloSize + token.size());
  put(&out[0], kHelloMagic);
  put(&out[4], kHandshakeVersion);
  put(&out[5], hello.mesh);
  put(&out[6], static_cast<std::uint16_t>(token.size()));
  put(&out[8], hello.comm_id);
  put(&out[16], hello.rank);
  put(&out[20], hello.size);
  if (!token.empty()) std::memcpy(&out[kHelloSize], token.data(), token.size());
  return out;
}

Hello decode_hello(std::span<const std::byte, kHelloSize> in) {
  auto magic = get<std::uint32_t>(&in[0]);
  if (magic != kHelloMagic) fail(ErrorCode::Protocol, "not a Canopy handshake (magic 0x{:08x})", magic);
  auto version = get<std::uint8_t>(&in[4]);
  if (version != kHandshakeVersion)
    fail(ErrorCode::Protocol, "handshake version {} is not supported (this build speaks {})", version,
         kHandshakeVersion);
  Hello hello;
  hello.mesh = get<std::uint8_t>(&in[5]);
  hello.token_bytes = get<std::uint16_t>(&in[6]);
  if (hello.token_bytes > kMaxTokenBytes)
    fail(ErrorCode::Protocol, "handshake announces a {}-byte token; at most {} are allowed",
         hello.token_bytes, kMaxTokenBytes);
  hello.comm_id = get<std::uint64_t>(&in[8]);
  hello.rank = get<std::uint32_t>(&in[16]);
  hello.size = get<std::uint32_t>(&in[20]);
  return hello;
}

std::array<std::byte, kAckSize> encode_ack(const Ack& ack) {
  std::array<std::byte, kAckSize> out{};
  put(&out[0], kAckMagic);
  put(&out[4], kHandshakeVersion);
  put(&out[5], static_cast<std::uint8_t>(ack.status));
  put(&out[8], ack.comm_id);
  put(&out[16], ack.rank);
  return out;
}

Ack decode_ack(std::span<const std::byte, kAckSize> in) {
  auto magic = get<std::uint32_t>(&in[0]);
  if (magic != kAckMagic) fail(ErrorCode::Protocol, "not a Canopy handshake answer (magic 0x{:08x})", magic);
  auto version = get<std::uint8_t>(&in[4]);
  if (version != kHandshakeVersion)
    fail(ErrorCode::Protocol, "handshake answer version {} is not supported (this build speaks {})", version,
         kHandshakeVersion);
  auto status = get<std::uint8_t>(&in[5]);
  if (status > static_cast<std::uint8_t>(AckStatus::NoSuchMesh))
    fail(ErrorCode::Protocol, "handshake answer with unknown status {}", status);
  Ack ack;
  ack.status = static_cast<AckStatus>(status);
  ack.comm_id = get<std::uint64_t>(&in[8]);
  ack.rank = get<std::uint32_t>(&in[16]);
  return ack;
}

}  // namespace canopy::transport
