#include "launcher/rdzv_options.hpp"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "common/error.hpp"
#include "common/settings.hpp"

namespace canopy::launcher {
namespace {

std::optional<int> whole_number(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    const auto at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

// A host and a port 1-65535: "node1:2379", "10.0.0.1:2379", "[::1]:2379".
void check_endpoint(std::string_view endpoint) {
  const auto colon = endpoint.rfind(':');
  const std::string_view host = colon == std::string_view::npos ? endpoint : endpoint.substr(0, colon);
  const bool bracketed = host.starts_with('[');
  const int port =
      colon == std::string_view::npos ? -1 : whole_number(endpoint.substr(colon + 1)).value_or(-1);
  if (host.empty() || host == "[]" || (bracketed && !host.ends_with(']')) ||
      (!bracketed && host.find(':') != std::string_view::npos) || port < 1 || port > 65535)
    fail(ErrorCode::Config, "--rdzv-endpoint '{}' is not HOST:PORT (an IPv6 host as [::1]:2379)", endpoint);
}

}  // namespace

ElasticRange parse_node_range(std::string_view text) {
  const auto colon = text.find(':');
  const std::optional<int> min = whole_number(text.substr(0, colon));
  const std::optional<int> max = colon == std::string_view::npos ? min : whole_number(text.substr(colon + 1));
  if (!min || !max)
    fail(ErrorCode::Config,
         "--nnodes '{}' is not N or MIN:MAX, the fewest and the most nodes the job may run with (e.g. 2:4)",
         text);
  if (*min < 1 || *max > 65536)
    fail(ErrorCode::Config, "--nnodes {}: nodes are counted from 1 to 65536", text);
  if (*min > *max) fail(ErrorCode::Config, "--nnodes {}: MIN is more than MAX", text);
  return ElasticRange{*min, *max};
}

RdzvBackend parse_rdzv_backend(std::string_view text) {
  if (text == "etcd" || text == "etcd-v2") return RdzvBackend::Etcd;
  if (text == "c10d") return RdzvBackend::C10d;
  if (text == "static") return RdzvBackend::Static;
  fail(ErrorCode::Config, "--rdzv-backend '{}' is none of etcd, c10d, static", text);
}

std::vector<std::string> parse_rdzv_endpoints(std::string_view text) {
  std::vector<std::string> endpoints;
  for (std::string_view endpoint : split(text, ',')) {
    check_endpoint(endpoint);
    endpoints.emplace_back(endpoint);
  }
  return endpoints;
}

void check_rdzv_id(std::string_view id) {
  if (id.empty() || id.size() > 128)
    fail(ErrorCode::Config, "--rdzv-id must have 1 to 128 characters (it names the job in the store)");
  for (char c : id) {
    const bool fits = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!fits)
      fail(ErrorCode::Config,
           "--rdzv-id '{}' may hold only letters, digits, '.', '_' and '-' (it becomes a key prefix in etcd)",
           id);
  }
}

void apply_rdzv_conf(std::string_view text, RdzvOptions& options) {
  for (std::string_view item : split(text, ',')) {
    const auto equals = item.find('=');
    if (equals == std::string_view::npos)
      fail(ErrorCode::Config, "--rdzv-conf '{}' is not KEY=VALUE[,KEY=VALUE...]", item);
    const std::string_view key = item.substr(0, equals), value = item.substr(equals + 1);
    const std::string name = fmt::format("--rdzv-conf {}", key);
    std::chrono::milliseconds* target = key == "join_timeout"        ? &options.join_timeout
                                        : key == "last_call_timeout" ? &options.last_call
                                        : key == "node_ttl"          ? &options.node_ttl
                                                                     : nullptr;
    if (target == nullptr)
      fail(ErrorCode::Config, "--rdzv-conf knows no '{}' (join_timeout, last_call_timeout, node_ttl)", key);
    *target = std::chrono::duration_cast<std::chrono::milliseconds>(settings::parse_duration(name, value));
    if (*target > std::chrono::hours(24))
      fail(ErrorCode::Config, "--rdzv-conf {}={} is more than a day", key, value);
  }
  if (options.join_timeout < std::chrono::seconds(1))
    fail(ErrorCode::Config, "--rdzv-conf join_timeout must be at least 1 s");
  if (options.node_ttl < std::chrono::seconds(1))
    fail(ErrorCode::Config, "--rdzv-conf node_ttl must be at least 1 s (etcd's leases count whole seconds)");
}

std::string etcd_job_address(const RdzvOptions& options) {
  std::string members;
  for (const std::string& endpoint : options.endpoints) members += (members.empty() ? "" : ",") + endpoint;
  return fmt::format("etcd://{}/canopy-run/{}", members, options.id);
}

}  // namespace canopy::launcher
