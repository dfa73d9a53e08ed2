#include "collectives/p2p/p2p_descriptor.hpp"

#include "common/error.hpp"
#include "common/little_endian.hpp"

namespace canopy::collectives {

P2PDescriptorBytes encode(const P2PDescriptor& descriptor) {
  P2PDescriptorBytes bytes{};
  bytes[0] = static_cast<std::byte>(descriptor.kind);
  little_endian::put<std::uint32_t>(bytes.data() + 4, descriptor.tag);
  little_endian::put<std::uint64_t>(bytes.data() + 8, descriptor.bytes);
  little_endian::put<std::uint64_t>(bytes.data() + 16, descriptor.id);
  return bytes;
}

P2PDescriptor decode_descriptor(std::span<const std::byte, kP2PDescriptorBytes> bytes, int sender) {
  const auto kind = std::to_integer<std::uint8_t>(bytes[0]);
  if (kind < static_cast<std::uint8_t>(P2PKind::Eager) || kind > static_cast<std::uint8_t>(P2PKind::Data))
    fail(ErrorCode::Protocol, "point-to-point descriptor from rank {} has unknown kind {}", sender, kind);
  for (std::size_t i : {1, 2, 3})
    if (bytes[i] != std::byte{0})
      fail(ErrorCode::Protocol, "point-to-point descriptor from rank {} has nonzero reserved bytes", sender);
  if (little_endian::get<std::uint64_t>(bytes.data() + 24) != 0)
    fail(ErrorCode::Protocol, "point-to-point descriptor from rank {} has nonzero reserved bytes", sender);
  P2PDescriptor descriptor;
  descriptor.kind = static_cast<P2PKind>(kind);
  descriptor.tag = little_endian::get<std::uint32_t>(bytes.data() + 4);
  descriptor.bytes = little_endian::get<std::uint64_t>(bytes.data() + 8);
  descriptor.id = little_endian::get<std::uint64_t>(bytes.data() + 16);
  return descriptor;
}

}  // namespace canopy::collectives
