#include "common/elastic_range.hpp"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "common/error.hpp"

namespace canopy {
namespace {

// A whole decimal number and nothing else.
std::optional<int> whole_number(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::string ElasticRange::text() const {
  return fmt::format("{}:{}", min, max);
}

ElasticRange parse_elastic_range(std::string_view source, std::string_view text) {
  const auto colon = text.find(':');
  const std::optional<int> min =
      colon == std::string_view::npos ? std::nullopt : whole_number(text.substr(0, colon));
  const std::optional<int> max =
      colon == std::string_view::npos ? std::nullopt : whole_number(text.substr(colon + 1));
  if (!min || !max)
    fail(ErrorCode::Config,
         "{} '{}' is not MIN:MAX, the fewest and the most ranks the job may run with (e.g. 3:4)", source,
         text);
  if (*min < 1) fail(ErrorCode::Config, "{} {}: MIN must be at least 1", source, text);
  if (*min > *max) fail(ErrorCode::Config, "{} {}: MIN is more than MAX", source, text);
  return ElasticRange{*min, *max};
}

}  // namespace canopy
