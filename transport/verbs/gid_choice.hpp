// Which GID a RoCE port should use. The GID table of a RoCE port holds one entry per IP address of
// its netdev, each as RoCE v1 and as RoCE v2; only v2 is routable, and the IPv4 entry
// (::ffff:a.b.c.d) is the one peers on an IPv4 fabric can reach. Gloo leaves the index to the user
// (default 0, a RoCE v1 link-local entry: the wrong one); this picks it from the table instead.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace canopy::transport::verbs {

enum class GidType { InfiniBand, RoCEv1, RoCEv2 };

struct GidEntry {
  int index = 0;
  std::array<std::uint8_t, 16> gid{};
  GidType type = GidType::InfiniBand;
};

// The preferred entry's index, or nullopt when the table has no usable entry. On Ethernet
// (`roce` true): RoCE v2 IPv4-mapped, then RoCE v2 IPv6 global, then RoCE v2 link-local, then the
// same order for RoCE v1. On InfiniBand: the first non-zero entry (the port GID, index 0).
std::optional<int> choose_gid(std::span<const GidEntry> table, bool roce);

// "::ffff:192.0.2.1 (RoCE v2, index 1)"-style text for logs and errors.
std::string describe(const GidEntry& entry);

}  // namespace canopy::transport::verbs
