#include "transport/verbs/gid_choice.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace canopy::transport::verbs {
namespace {

bool is_zero(const GidEntry& e) {
  return std::all_of(e.gid.begin(), e.gid.end(), [](std::uint8_t b) { return b == 0; });
}

bool is_ipv4_mapped(const GidEntry& e) {
  return std::all_of(e.gid.begin(), e.gid.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
         e.gid[10] == 0xff && e.gid[11] == 0xff;
}

bool is_link_local(const GidEntry& e) {
  return e.gid[0] == 0xfe && (e.gid[1] & 0xc0) == 0x80;
}

// Lower is better; nullopt: never use.
std::optional<int> rank_of(const GidEntry& e, bool roce) {
  if (is_zero(e)) return std::nullopt;
  if (!roce) return e.type == GidType::InfiniBand ? std::optional<int>(0) : std::nullopt;
  int version = e.type == GidType::RoCEv2 ? 0 : e.type == GidType::RoCEv1 ? 3 : -1;
  if (version < 0) return std::nullopt;
  int address = is_ipv4_mapped(e) ? 0 : is_link_local(e) ? 2 : 1;
  return version + address;
}

}  // namespace

std::optional<int> choose_gid(std::span<const GidEntry> table, bool roce) {
  std::optional<int> best_rank, best_index;
  for (const GidEntry& entry : table) {
    auto rank = rank_of(entry, roce);
    if (rank && (!best_rank || *rank < *best_rank)) {  // ties: the lowest index, as listed
      best_rank = rank;
      best_index = entry.index;
    }
  }
  return best_index;
}

std::string describe(const GidEntry& entry) {
  std::string text;
  if (is_ipv4_mapped(entry)) {
    text = fmt::format("::ffff:{}.{}.{}.{}", entry.gid[12], entry.gid[13], entry.gid[14], entry.gid[15]);
  } else {
    for (std::size_t i = 0; i < 16; i += 2)
      text += fmt::format("{}{:02x}{:02x}", i == 0 ? "" : ":", entry.gid[i], entry.gid[i + 1]);
  }
  const char* type = entry.type == GidType::RoCEv2   ? "RoCE v2"
                     : entry.type == GidType::RoCEv1 ? "RoCE v1"
                                                     : "IB";
  return fmt::format("{} ({}, index {})", text, type, entry.index);
}

}  // namespace canopy::transport::verbs
