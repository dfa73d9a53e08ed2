#include "rendezvous/slurm_hostlist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "common/error.hpp"
#include "rendezvous/printable.hpp"

namespace canopy::rendezvous {
namespace {

// Node numbers are far shorter; 18 decimal digits always fit in 64 bits.
constexpr std::size_t kMaxDigits = 18;

struct NumberRange {
  std::uint64_t low = 0, high = 0;
  std::size_t width = 0;  // digits of the low bound as written: "01-10" pads to 2
  std::uint64_t size() const { return high - low + 1; }
};

// One piece of a host name: literal text, or a bracket's ranges (then `text` is empty).
struct Piece {
  std::string text;
  std::vector<NumberRange> ranges;
  bool is_bracket() const { return !ranges.empty(); }
};

// One comma-separated name of the list, as pieces; it stands for the product of its brackets.
using Pattern = std::vector<Piece>;

class HostlistParser {
 public:
  HostlistParser(std::string_view list, std::string_view origin, std::size_t max_hosts)
      : list_(list), origin_(origin), max_hosts_(std::min(max_hosts, kMaxHostlistHosts)) {}

  // The list's names, checked, with the number of hosts they stand for at most max_hosts.
  std::vector<Pattern> parse() {
    if (list_.empty()) refuse(0, "it is empty");
    std::vector<Pattern> patterns;
    std::uint64_t hosts = 0;
    while (true) {
      patterns.push_back(parse_name());
      hosts += host_count(patterns.back());
      if (hosts > max_hosts_) refuse(at_, fmt::format("it names more than {} hosts", max_hosts_));
      if (at_ == list_.size()) return patterns;
      ++at_;  // the ',' parse_name stopped at
    }
  }

 private:
  [[noreturn]] void refuse(std::size_t at, std::string_view why) const {
    fail(ErrorCode::Config, "{}={} is not a SLURM hostlist like node[01-04,07],gpu3: {} (at position {})",
         origin_, printable(list_), why, at);
  }

  Pattern parse_name() {
    const std::size_t start = at_;
    Pattern pattern;
    while (at_ < list_.size() && list_[at_] != ',') {
      if (list_[at_] == '[') {
        pattern.push_back(parse_bracket());
      } else if (list_[at_] == ']') {
        refuse(at_, "a ']' without its '['");
      } else {
        pattern.push_back(parse_text());
      }
    }
    if (pattern.empty()) refuse(start, "an empty name");
    bool has_bracket = false;
    for (const Piece& piece : pattern) has_bracket |= piece.is_bracket();
    if (has_bracket && !pattern.back().is_bracket())
      refuse(at_ - pattern.back().text.size(), "text after a name's last bracket");
    return pattern;
  }

  Piece parse_text() {
    Piece piece;
    while (at_ < list_.size() && list_[at_] != ',' && list_[at_] != '[' && list_[at_] != ']') {
      auto c = static_cast<unsigned char>(list_[at_]);
      if (c <= ' ' || c >= 0x7f) refuse(at_, "a space or a non-printable byte in a host name");
      piece.text.push_back(list_[at_++]);
    }
    return piece;
  }

  Piece parse_bracket() {
    const std::size_t open = at_++;
    Piece piece;
    while (true) {
      piece.ranges.push_back(parse_range());
      if (at_ == list_.size()) refuse(open, "a '[' without its ']'");
      if (list_[at_] == ']') break;
      if (list_[at_] != ',') refuse(at_, "a range that is not N or N-M");
      ++at_;
    }
    ++at_;
    return piece;
  }

  NumberRange parse_range() {
    NumberRange range;
    const std::size_t start = at_;
    range.low = parse_number();
    range.width = at_ - start;
    range.high = range.low;
    if (at_ < list_.size() && list_[at_] == '-') {
      ++at_;
      range.high = parse_number();
    }
    if (range.high < range.low) refuse(start, "a range whose end is below its start");
    return range;
  }

  std::uint64_t parse_number() {
    const std::size_t start = at_;
    std::uint64_t value = 0;
    while (at_ < list_.size() && list_[at_] >= '0' && list_[at_] <= '9') {
      if (at_ - start == kMaxDigits)
        refuse(start, fmt::format("a number of more than {} digits", kMaxDigits));
      value = value * 10 + static_cast<std::uint64_t>(list_[at_++] - '0');
    }
    if (at_ == start) refuse(at_, "a range that is not N or N-M (decimal digits)");
    return value;
  }

  // Hosts a name stands for (the product of its brackets' sizes), saturating just above the limit.
  std::uint64_t host_count(const Pattern& pattern) const {
    const std::uint64_t saturated = max_hosts_ + 1;
    std::uint64_t count = 1;
    for (const Piece& piece : pattern) {
      if (!piece.is_bracket()) continue;
      std::uint64_t numbers = 0;
      for (const NumberRange& range : piece.ranges) numbers = std::min(numbers + range.size(), saturated);
      count = std::min(count * numbers, saturated);
    }
    return count;
  }

  std::string_view list_;
  std::string_view origin_;
  std::size_t max_hosts_;
  std::size_t at_ = 0;
};

void append_number(std::string& name, std::uint64_t number, std::size_t width) {
  fmt::format_to(std::back_inserter(name), "{:0{}}", number, width);
}

// Appends every host of `pattern` from piece `index` on, each after `head`, in SLURM's order.
void expand_into(const Pattern& pattern, std::size_t index, const std::string& head,
                 std::vector<std::string>& hosts) {
  if (index == pattern.size()) {
    hosts.push_back(head);
    return;
  }
  const Piece& piece = pattern[index];
  if (!piece.is_bracket()) {
    expand_into(pattern, index + 1, head + piece.text, hosts);
    return;
  }
  for (const NumberRange& range : piece.ranges) {
    for (std::uint64_t n = range.low;; ++n) {
      std::string name = head;
      append_number(name, n, range.width);
      expand_into(pattern, index + 1, name, hosts);
      if (n == range.high) break;
    }
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view origin,
                                         std::size_t max_hosts) {
  std::vector<std::string> hosts;
  for (const Pattern& pattern : HostlistParser(list, origin, max_hosts).parse())
    expand_into(pattern, 0, "", hosts);
  return hosts;
}

std::string first_host_of_hostlist(std::string_view list, std::string_view origin) {
  const std::vector<Pattern> patterns = HostlistParser(list, origin, kMaxHostlistHosts).parse();
  std::string host;
  for (const Piece& piece : patterns.front()) {
    if (piece.is_bracket()) {
      append_number(host, piece.ranges.front().low, piece.ranges.front().width);
    } else {
      host += piece.text;
    }
  }
  return host;
}

}  // namespace canopy::rendezvous
