#include "collectives/forming/host_layout_exchange.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "common/cpu_list.hpp"
#include "common/error.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy::collectives {

// "<cpu list> <host id>": the host id is last because it may hold spaces (CANOPY_HOST_ID is free text).
HostLayout layout_from_entries(const std::vector<std::string>& entries) {
  HostLayout layout;
  std::map<std::string, int> host_index;
  std::vector<std::set<int>> cpus_of_host;
  for (std::size_t r = 0; r < entries.size(); ++r) {
    const std::string& entry = entries[r];
    const std::size_t space = entry.find(' ');
    if (space == std::string::npos || space == 0)
      fail(ErrorCode::Protocol,
           "rank {} published a malformed host entry '{}' (expected '<cpu list> <host id>')", r, entry);
    std::vector<int> cpus = parse_cpu_list(std::string_view(entry).substr(0, space));
    auto [it, added] = host_index.emplace(entry.substr(space + 1), static_cast<int>(cpus_of_host.size()));
    if (added) cpus_of_host.emplace_back();
    cpus_of_host[static_cast<std::size_t>(it->second)].insert(cpus.begin(), cpus.end());
    layout.host_of_rank.push_back(it->second);
  }
  for (const std::set<int>& cpus : cpus_of_host)
    layout.cores_of_host.push_back(static_cast<int>(cpus.size()));
  return layout;
}

namespace {

// "<host of rank 0>,<host of rank 1>,...;<cores of host 0>,<cores of host 1>,...;<verbs verdict>": the
// verdict is last because its reason is free text.
std::string encode(const HostLayout& layout, const std::string& verbs_verdict) {
  return fmt::format("{};{};{}", fmt::join(layout.host_of_rank, ","), fmt::join(layout.cores_of_host, ","),
                     verbs_verdict);
}

std::vector<int> numbers(std::string_view text, const std::string& whole) {
  std::vector<int> values;
  while (!text.empty()) {
    const std::size_t comma = std::min(text.find(','), text.size());
    int value = 0;
    auto parsed = std::from_chars(text.data(), text.data() + comma, value);
    if (parsed.ec != std::errc{} || parsed.ptr != text.data() + comma || value < 0)
      fail(ErrorCode::Protocol, "malformed host layout '{}' in the store", whole);
    values.push_back(value);
    text.remove_prefix(std::min(comma + 1, text.size()));
  }
  return values;
}

LayoutAgreement decode(const std::string& text, int size) {
  const std::size_t semicolon = text.find(';');
  const std::size_t second = semicolon == std::string::npos ? semicolon : text.find(';', semicolon + 1);
  if (second == std::string::npos) fail(ErrorCode::Protocol, "malformed host layout '{}' in the store", text);
  LayoutAgreement agreed;
  agreed.verbs_verdict = text.substr(second + 1);
  HostLayout& layout = agreed.layout;
  layout.host_of_rank = numbers(std::string_view(text).substr(0, semicolon), text);
  layout.cores_of_host = numbers(std::string_view(text).substr(semicolon + 1, second - semicolon - 1), text);
  const bool hosts_known = std::all_of(layout.host_of_rank.begin(), layout.host_of_rank.end(), [&](int host) {
    return static_cast<std::size_t>(host) < layout.cores_of_host.size();
  });
  if (layout.host_of_rank.size() != static_cast<std::size_t>(size) || !hosts_known)
    fail(ErrorCode::Protocol, "host layout '{}' in the store does not fit a group of {} ranks", text, size);
  return agreed;
}

// A record: "<addresses>\n<claim>\n<verbs>\n<unix listeners>\n<cpu list> <host id>". The host id comes
// last, since it is free text.
struct RecordParts {
  std::string_view addresses, claim, verbs, listeners, entry;
};

std::optional<RecordParts> parts_of(std::string_view record) {
  std::array<std::size_t, 4> ends{};
  std::size_t from = 0;
  for (std::size_t& end : ends) {
    end = record.find('\n', from);
    if (end == std::string_view::npos) return std::nullopt;
    from = end + 1;
  }
  RecordParts parts;
  parts.addresses = record.substr(0, ends[0]);
  parts.claim = record.substr(ends[0] + 1, ends[1] - ends[0] - 1);
  parts.verbs = record.substr(ends[1] + 1, ends[2] - ends[1] - 1);
  parts.listeners = record.substr(ends[2] + 1, ends[3] - ends[2] - 1);
  parts.entry = record.substr(ends[3] + 1);
  return parts;
}

RecordParts parts_or_fail(const std::string& record, std::size_t rank) {
  const auto parts = parts_of(record);
  if (!parts)
    fail(ErrorCode::Protocol,
         "rank {} published a malformed record '{}' (expected "
         "'<addresses>\\n<claim>\\n<verbs>\\n<unix listeners>\\n<cpu list> <host id>')",
         rank, record);
  return *parts;
}

// One line: a record's parts are separated by newlines.
std::string on_one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// Who holds a claimed record, in words: "<host id> pid <pid> (<random>)".
std::string holder_of(const std::string& record) {
  const auto parts = parts_of(record);
  if (!parts) return fmt::format("'{}'", record);
  const std::size_t space = parts->entry.find(' ');
  const std::string_view host =
      space == std::string_view::npos ? parts->entry : parts->entry.substr(space + 1);
  return fmt::format("{} {}", host, parts->claim.empty() ? std::string_view("(no claim)") : parts->claim);
}

}  // namespace

std::string rank_record_key(int rank) {
  return fmt::format("layout/{}", rank);
}

std::string addresses_in_record(const std::string& record, int rank) {
  return std::string(parts_or_fail(record, static_cast<std::size_t>(rank)).addresses);
}

std::string listeners_in_record(const std::string& record, int rank) {
  return std::string(parts_or_fail(record, static_cast<std::size_t>(rank)).listeners);
}

std::string verbs_verdict_of(const std::vector<std::string_view>& said) {
  if (std::all_of(said.begin(), said.end(), [](std::string_view s) { return s.empty(); })) return {};
  for (std::size_t r = 0; r < said.size(); ++r) {
    if (said[r] == "1") continue;
    if (said[r].empty())
      return fmt::format(
          "{}:it did not say whether it can (is CANOPY_TRANSPORT=auto set alike on every rank?)", r);
    return fmt::format("{}:{}", r, said[r].substr(1));
  }
  return "1";
}

LayoutAgreement exchange_host_layout(Store& store, int rank, int size, const std::string& host_id,
                                     const std::vector<int>& cpus, const RankRecord& extra,
                                     const std::vector<std::string>& also_read) {
  const std::string entry = fmt::format("{} {}", format_cpu_list(cpus), host_id);
  const std::string record = fmt::format("{}\n{}\n{}\n{}\n{}", extra.addresses, extra.claim,
                                         on_one_line(extra.verbs), extra.listeners, entry);
  rendezvous::PublishValue publish;
  if (!extra.claim.empty())
    publish = [&](Store& s, const std::string& key, const std::string& value) {
      const std::string holder = s.compare_set(key, "", value);
      if (holder != value) rendezvous::fail_rank_claimed(rank, holder_of(holder), holder_of(value));
    };
  std::vector<std::string> gathered;  // rank 0's
  if (rank != 0 && !also_read.empty()) {
    // agree_through_rank_zero's part for a rank other than 0, with the other records in the same request:
    // every record is there once the layout is.
    const std::string key = rank_record_key(rank);
    if (publish)
      publish(store, key, record);
    else
      store.set(key, record);
    std::vector<std::string> keys{"layout"};
    keys.insert(keys.end(), also_read.begin(), also_read.end());
    std::vector<std::string> values = store.get_many(keys);
    LayoutAgreement agreed = decode(values[0], size);
    agreed.also_read.assign(std::make_move_iterator(values.begin() + 1),
                            std::make_move_iterator(values.end()));
    return agreed;
  }
  const std::string layout = rendezvous::agree_through_rank_zero(
      store, "layout", rank, size, record,
      [&gathered](const std::vector<std::string>& records) {
        gathered = records;
        std::vector<std::string> entries;
        std::vector<std::string_view> verbs;
        entries.reserve(records.size());
        verbs.reserve(records.size());
        for (std::size_t r = 0; r < records.size(); ++r) {
          const RecordParts parts = parts_or_fail(records[r], r);
          entries.emplace_back(parts.entry);
          verbs.push_back(parts.verbs);
        }
        return encode(layout_from_entries(entries), on_one_line(verbs_verdict_of(verbs)));
      },
      publish);
  LayoutAgreement agreed = decode(layout, size);
  agreed.records = std::move(gathered);
  return agreed;
}

}  // namespace canopy::collectives
