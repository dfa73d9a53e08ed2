// The first bytes on every mesh connection. The connecting rank says who it is and proves it belongs to
// the job (token) and the communicator (comm id); the accepting rank answers with an ack saying whether
// it took the connection. Anything else (a port scanner, a stray job, garbage) is dropped.
//
// Hello (24 bytes + token, little-endian): u32 magic "CNPH", u8 version, u8 mesh, u16 token length,
//   u64 comm_id, u32 rank, u32 size; then the token bytes. `mesh` says which of the meshes sharing the
//   accepting rank's listener the connection is for (tcp_listener.hpp).
// Ack (24 bytes): u32 magic "CNPA", u8 version, u8 status, u16 reserved, u64 comm_id, u32 rank, u32 reserved.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/token.hpp"

namespace canopy::transport {

inline constexpr std::uint32_t kHelloMagic = 0x48504E43;  // "CNPH"
inline constexpr std::uint32_t kAckMagic = 0x41504E43;    // "CNPA"
inline constexpr std::uint8_t kHandshakeVersion = 2;
inline constexpr std::size_t kHelloSize = 24;
inline constexpr std::size_t kAckSize = 24;
inline constexpr std::size_t kMaxTokenBytes = 1024;

struct Hello {
  std::uint64_t comm_id = 0;
  std::uint32_t rank = 0;
  std::uint32_t size = 0;
  std::uint8_t mesh = 0;          // of the accepting rank's listener; 0 where it serves one mesh
  std::uint16_t token_bytes = 0;  // the token follows the fixed part
};

enum class AckStatus : std::uint8_t {
  Accepted = 0,
  WrongToken = 1,
  WrongComm = 2,
  BadRank = 3,
  Duplicate = 4,
  OtherUser = 5,  // the shared-memory handshake: the connecting process runs as another user
  NoSuchMesh = 6  // the hello names a mesh the accepting rank's listener does not serve
};
std::string_view to_string(AckStatus status);

struct Ack {
  AckStatus status = AckStatus::Accepted;
  std::uint64_t comm_id = 0;
  std::uint32_t rank = 0;  // the accepting rank
};

// The fixed part followed by the token. Throws Error(InvalidArgument) when the token is too long.
std::vector<std::byte> encode_hello(const Hello& hello, std::string_view token);
// Throws Error(Protocol) with the reason (bad magic, version, token length).
Hello decode_hello(std::span<const std::byte, kHelloSize> bytes);

std::array<std::byte, kAckSize> encode_ack(const Ack& ack);
Ack decode_ack(std::span<const std::byte, kAckSize> bytes);

// The hello's token is compared with the job's by tokens_equal (common/token.hpp).
using canopy::tokens_equal;

}  // namespace canopy::transport
