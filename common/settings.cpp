#include "common/settings.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "common/error.hpp"

namespace canopy::settings {
namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool same_word(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// A range bound in the setting's own terms.
std::string format_amount(const Spec& spec, double value) {
  switch (spec.kind) {
    case Kind::Size:
      return format_size(static_cast<std::uint64_t>(value));
    case Kind::Duration:
      return value < 1e-3 ? fmt::format("{} us", value * 1e6)
             : value < 1  ? fmt::format("{} ms", value * 1e3)
                          : fmt::format("{} s", value);
    default:
      return fmt::format("{}", value);
  }
}

[[noreturn]] void out_of_range(const Spec& spec, std::string_view text) {
  fail(ErrorCode::Config, "{}='{}' is out of range: use {}from {} to {}", spec.name, text,
       spec.zero_means.empty() ? "" : fmt::format("0 ({}) or a value ", spec.zero_means),
       format_amount(spec, spec.low), format_amount(spec, spec.high));
}

// The value in the units `low` and `high` count: the number itself, bytes, or seconds.
double amount(const Spec& spec, long long integer, std::uint64_t size, std::chrono::microseconds duration) {
  switch (spec.kind) {
    case Kind::Integer:
      return static_cast<double>(integer);
    case Kind::Size:
      return static_cast<double>(size);
    default:
      return std::chrono::duration<double>(duration).count();
  }
}

}  // namespace

bool parse_flag(std::string_view name, std::string_view text) {
  if (text == "1" || same_word(text, "true")) return true;
  if (text == "0" || same_word(text, "false")) return false;
  fail(ErrorCode::Config, "{}='{}' is not a flag: use 1 or true, 0 or false", name, text);
}

long long parse_integer(std::string_view name, std::string_view text) {
  long long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty())
    fail(ErrorCode::Config, "{}='{}' is not a whole number (such as 3 or -1)", name, text);
  return value;
}

std::uint64_t parse_size(std::string_view name, std::string_view text) {
  std::uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") shift = 10;
  if (suffix == "M" || suffix == "m" || suffix == "MiB") shift = 20;
  if (suffix == "G" || suffix == "g" || suffix == "GiB") shift = 30;
  if (error == std::errc::result_out_of_range || (shift > 0 && value > (UINT64_MAX >> shift)))
    fail(ErrorCode::Config, "{}='{}' is too large a size", name, text);
  if (error != std::errc() || shift < 0)
    fail(ErrorCode::Config,
         "{}='{}' is not a size: use a whole number of bytes with an optional K, M or G (or KiB, MiB, GiB: "
         "powers of 1024), such as 64K",
         name, text);
  return value << shift;
}

std::string format_size(std::uint64_t bytes) {
  for (auto [shift, suffix] : {std::pair{30, "G"}, std::pair{20, "M"}, std::pair{10, "K"}})
    if (bytes >= (1ull << shift) && bytes % (1ull << shift) == 0)
      return fmt::format("{}{}", bytes >> shift, suffix);
  return fmt::format("{}", bytes);
}

std::chrono::microseconds parse_duration(std::string_view name, std::string_view text, double unit_seconds) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  double unit = suffix.empty()   ? unit_seconds
                : suffix == "us" ? 1e-6
                : suffix == "ms" ? 1e-3
                : suffix == "s"  ? 1
                                 : 0;
  const double microseconds = value * unit * 1e6;
  if (error != std::errc() || unit == 0 || !(value >= 0) || !std::isfinite(value) || microseconds > 1e15)
    fail(ErrorCode::Config,
         "{}='{}' is not a duration: use a number of {} (such as {}), or one ending in us, ms or s (such as "
         "200ms)",
         name, text,
         unit_seconds == 1      ? "seconds"
         : unit_seconds == 1e-3 ? "milliseconds"
                                : "microseconds",
         unit_seconds == 1      ? "0.5"
         : unit_seconds == 1e-3 ? "200"
                                : "20");
  return std::chrono::microseconds(std::llround(microseconds));
}

std::string_view parse_choice(std::string_view name, std::string_view text, std::string_view choices) {
  for (std::size_t start = 0; start <= choices.size();) {
    std::size_t end = std::min(choices.find('|', start), choices.size());
    if (same_word(text, choices.substr(start, end - start))) return choices.substr(start, end - start);
    start = end + 1;
  }
  std::string known;
  for (char c : choices) known += c == '|' ? std::string(", ") : std::string(1, c);
  fail(ErrorCode::Config, "{}='{}' is not one of: {} (in any case)", name, text, known);
}

const Spec* find_spec(std::string_view name) {
  for (const Spec& spec : kRegistry)
    if (spec.name == name) return &spec;
  return nullptr;
}

Settings::Value Settings::read(const Spec& spec, std::string_view text) {
  Value value;
  if (text.empty()) return value;
  value.present = true;
  switch (spec.kind) {
    case Kind::Flag:
      value.flag = parse_flag(spec.name, text);
      return value;
    case Kind::Integer:
      value.integer = parse_integer(spec.name, text);
      break;
    case Kind::Size:
      value.size = parse_size(spec.name, text);
      break;
    case Kind::Duration:
      value.duration = parse_duration(spec.name, text, spec.unit_seconds);
      break;
    case Kind::Choice:
      value.text = parse_choice(spec.name, text, spec.choices);
      return value;
    case Kind::Text:
      value.text = text;
      return value;
  }
  const double number = amount(spec, value.integer, value.size, value.duration);
  if (number == 0 && !spec.zero_means.empty()) return value;
  if (number < spec.low || number > spec.high) out_of_range(spec, text);
  return value;
}

Settings Settings::parse(const EnvMap& env) {
  Settings settings;
  settings.values_.reserve(std::size(kRegistry));
  for (const Spec& spec : kRegistry) {
    auto given = env_value(env, std::string(spec.name));
    settings.values_.push_back(read(spec, given ? std::string_view(*given) : spec.fallback));
  }
  return settings;
}

}  // namespace canopy::settings
