#include "gradsync/registration_check.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace canopy::gradsync {
namespace {

std::int64_t name_hash(const std::string& name) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a: stable across processes, unlike std::hash
  for (unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<std::int64_t>(hash & 0x7fffffffffffffffull);
}

const char* device_name(std::int64_t device) {
  return device == static_cast<int>(Device::CUDA) ? "cuda" : "cpu";
}

}  // namespace

EntryDescription describe_entry(const std::string& name, const TensorView& gradient,
                                const TensorView& parameter) {
  bool has_parameter = parameter.data != nullptr;
  return {static_cast<std::int64_t>(gradient.count),
          static_cast<std::int64_t>(gradient.dtype),
          static_cast<std::int64_t>(gradient.device),
          has_parameter ? static_cast<std::int64_t>(parameter.count) : -1,
          has_parameter ? static_cast<std::int64_t>(parameter.dtype) : -1,
          name_hash(name)};
}

std::optional<std::size_t> first_difference(const std::vector<EntryDescription>& a,
                                            const std::vector<EntryDescription>& b) {
  std::size_t common = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < common; ++i)
    if (a[i] != b[i]) return i;
  if (a.size() != b.size()) return common;
  return std::nullopt;
}

std::string entry_text(const EntryDescription& entry) {
  auto type_name = [](std::int64_t type) { return to_string(static_cast<DataType>(type)); };
  std::string text = fmt::format("{} x {} on {}", entry[0], type_name(entry[1]), device_name(entry[2]));
  if (entry[3] < 0) return text + ", no parameter";
  return text + fmt::format(", parameter {} x {}, name hash {:x}", entry[3], type_name(entry[4]), entry[5]);
}

}  // namespace canopy::gradsync
