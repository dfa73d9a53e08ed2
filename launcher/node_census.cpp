#include "launcher/node_census.hpp"

#include <fmt/format.h>

#include <charconv>

#include "common/error.hpp"

namespace canopy::launcher {

std::string node_keys::record(std::uint64_t ticket) {
  return fmt::format("canopy-run/node/{}", ticket);
}

std::string NodeRecord::text() const {
  return fmt::format("{} {}", nproc, host);
}

NodeRecord NodeRecord::parse(std::uint64_t ticket, const std::string& text) {
  NodeRecord record;
  record.ticket = ticket;
  const auto space = text.find(' ');
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + std::min(space, text.size()), record.nproc);
  if (space == std::string::npos || ec != std::errc() || end != text.data() + space || record.nproc < 1)
    fail(ErrorCode::Protocol,
         "canopy-run: the record of node ticket {} in the store is not '<nproc> <host>': {}", ticket,
         text.substr(0, 80));
  record.host = text.substr(space + 1);
  return record;
}

std::string NodeRecord::describe() const {
  return fmt::format("node '{}' (ticket {})", host, ticket);
}

std::string nodes_text(std::size_t n) {
  return fmt::format("{} node{}", n, n == 1 ? "" : "s");
}

std::string describe_nodes(const std::vector<NodeRecord>& nodes) {
  std::string text;
  for (const NodeRecord& node : nodes) text += (text.empty() ? "" : ", ") + node.describe();
  return text.empty() ? "none" : text;
}

std::uint64_t NodeCensus::tickets_taken() {
  if (!store_->check({node_keys::kTickets})) return 0;
  const std::string text = store_->get(node_keys::kTickets);
  std::uint64_t tickets = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), tickets);
  if (ec != std::errc() || end != text.data() + text.size())
    fail(ErrorCode::Protocol, "canopy-run: the node ticket counter in the store is not a number: {}",
         text.substr(0, 80));
  return tickets;
}

NodeCensus::Count NodeCensus::count() {
  const std::uint64_t tickets = tickets_taken();
  std::vector<std::uint64_t> candidates;
  std::vector<std::string> keys;
  for (std::uint64_t ticket = 1; ticket <= tickets; ++ticket) {
    if (gone_.contains(ticket)) continue;
    candidates.push_back(ticket);
    keys.push_back(node_keys::record(ticket));
  }
  // The common case, every record there, in one request; else one request a record.
  const bool all_there = !keys.empty() && store_->check(keys);
  Count result;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::uint64_t ticket = candidates[i];
    const bool there = all_there || store_->check({keys[i]});
    auto seen = seen_.find(ticket);
    if (there && seen == seen_.end()) {
      // Read once: a record never changes while it lives. It may lapse between the check and the read.
      try {
        seen = seen_.emplace(ticket, NodeRecord::parse(ticket, store_->get(keys[i], Duration(0)))).first;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Timeout) throw;
        continue;
      }
    }
    if (there) {
      result.live.push_back(seen->second);
    } else if (seen != seen_.end()) {
      result.newly_gone.push_back(seen->second);
      seen_.erase(seen);
      gone_.insert(ticket);
    }
  }
  return result;
}

}  // namespace canopy::launcher
