#include "transport/verbs/hca_spec.hpp"

#include <charconv>

#include "common/error.hpp"

namespace canopy::transport::verbs {

HcaSpec HcaSpec::parse(std::string_view text) {
  HcaSpec spec;
  if (!text.empty() && text.front() == '^') {
    spec.exclude = true;
    text.remove_prefix(1);
  }
  if (!text.empty() && text.front() == '=') {
    spec.exact = true;
    text.remove_prefix(1);
  }
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    Entry entry;
    std::size_t colon = item.find(':');
    entry.name = std::string(item.substr(0, colon));
    if (entry.name.empty())
      fail(ErrorCode::Config, "CANOPY_IB_HCA: empty device name in '{}' (expected e.g. 'mlx5_0:1,mlx5_1')",
           item);
    if (colon != std::string_view::npos) {
      std::string_view port = item.substr(colon + 1);
      auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), entry.port);
      if (error != std::errc() || end != port.data() + port.size() || entry.port < 1 || entry.port > 255)
        fail(ErrorCode::Config, "CANOPY_IB_HCA: port '{}' of device '{}' is not a number from 1 to 255", port,
             entry.name);
    }
    spec.entries.push_back(std::move(entry));
  }
  return spec;
}

bool HcaSpec::matches(std::string_view device, int port) const {
  if (entries.empty()) return !exclude;
  bool listed = false;
  for (const Entry& entry : entries) {
    bool name_matches = exact ? device == entry.name : device.starts_with(entry.name);
    if (name_matches && (entry.port == 0 || entry.port == port)) listed = true;
  }
  return listed != exclude;
}

}  // namespace canopy::transport::verbs
