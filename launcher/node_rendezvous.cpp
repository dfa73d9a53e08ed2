#include "launcher/node_rendezvous.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <thread>

#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/console.hpp"
#include "rendezvous/etcd_store.hpp"

namespace canopy::launcher {
namespace {

using namespace std::chrono_literals;

// A store request that does not wait: etcd answers in milliseconds, or fails over within this.
constexpr Duration kRequestLimit = 10s;
constexpr Duration kRemoveLimit = 2s;
// The longest a wait for the next node goes without asking `stop_signal` and whether the list was fixed.
constexpr Duration kWaitSlice = 1s;

// CANOPY_HOST_ID (emulated hosts, tests), else the host name: what names this node in messages.
std::string this_host() {
  if (auto id = env_value(current_environment(), "CANOPY_HOST_ID"); id && !id->empty()) return *id;
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

}  // namespace

NodeRendezvous::NodeRendezvous(const LaunchOptions& options, const std::string& job_token)
    : options_(options), address_(etcd_job_address(options.rdzv)) {
  shared_ = rendezvous::connect_etcd_store(address_, job_token, kRequestLimit);
  own_ = rendezvous::connect_etcd_store(address_, job_token, kRequestLimit, options.rdzv.node_ttl);
  record_.nproc = options.nproc;
  record_.host = this_host();
  std::replace(record_.host.begin(), record_.host.end(), '\n', ' ');  // one member a line in the list
}

NodeRendezvous::~NodeRendezvous() {
  if (record_.ticket == 0) return;
  try {
    // Briefly: a store that cannot answer now must not hold canopy-run's exit, and the record expires anyway.
    own_->open_another(kRemoveLimit)->remove(node_keys::record(record_.ticket));
  } catch (const std::exception& e) {
    log::info("canopy-run: could not remove this node's record from {} (it expires by itself): {}", address_,
              e.what());
  }
}

void NodeRendezvous::take_ticket() {
  record_.ticket = static_cast<std::uint64_t>(shared_->add(node_keys::kTickets, 1));
  own_->set(node_keys::record(record_.ticket), record_.text());
  log::info("canopy-run: {} took node ticket {} in {}", record_.host, record_.ticket, address_);
}

NodePlacement NodeRendezvous::meet(const std::function<int()>& stop_signal) {
  if (shared_->check({node_keys::kMembers}))
    return join_running_job(decode(shared_->get(node_keys::kMembers)), stop_signal);
  take_ticket();
  const ElasticRange& range = options_.rdzv.nodes;
  NodeCensus census(shared_);
  std::vector<NodeRecord> live = wait_for_nodes(census, static_cast<std::size_t>(range.min),
                                                Deadline::after(options_.rdzv.join_timeout), stop_signal);
  if (!shared_->check({node_keys::kMembers})) {
    if (live.size() < static_cast<std::size_t>(range.min))
      fail(ErrorCode::Timeout,
           "only {} of the {} that --nnodes {} needs met in {} within {} s (--rdzv-conf join_timeout): {}",
           nodes_text(live.size()), nodes_text(static_cast<std::size_t>(range.min)), range.text(), address_,
           std::chrono::duration_cast<std::chrono::seconds>(options_.rdzv.join_timeout).count(),
           describe_nodes(live));
    // The last call: MIN are here; more may be a moment behind.
    if (live.size() < static_cast<std::size_t>(range.max))
      live = wait_for_nodes(census, static_cast<std::size_t>(range.max),
                            Deadline::after(options_.rdzv.last_call), stop_signal);
    if (live.size() > static_cast<std::size_t>(range.max)) live.resize(static_cast<std::size_t>(range.max));
    // The first launcher to get here fixes the list; every other reads the one it fixed.
    shared_->compare_set(node_keys::kMembers, "", encode(live));
  }
  const std::vector<Member> members = decode(shared_->get(node_keys::kMembers));
  const bool listed = std::any_of(members.begin(), members.end(),
                                  [&](const Member& m) { return m.ticket == record_.ticket; });
  return listed ? place_member(members) : join_running_job(members, stop_signal);
}

std::vector<NodeRecord> NodeRendezvous::wait_for_nodes(NodeCensus& census, std::size_t want,
                                                       Deadline deadline,
                                                       const std::function<int()>& stop_signal) {
  for (;;) {
    if (int signal = stop_signal(); signal != 0) throw RendezvousStopped{signal};
    std::vector<NodeRecord> live = census.count().live;
    if (live.size() >= want || deadline.expired() || shared_->check({node_keys::kMembers})) return live;
    // The next ticket's record is the next node to come: a watch on it wakes this wait as it is written.
    const std::string next = node_keys::record(census.tickets_taken() + 1);
    const auto slice = std::min(kWaitSlice, std::chrono::duration_cast<Duration>(deadline.remaining()));
    try {
      shared_->wait({next}, slice);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
    }
  }
}

NodePlacement NodeRendezvous::place_member(const std::vector<Member>& members) const {
  NodePlacement placement;
  placement.store_address = address_;
  placement.job_ranks = {options_.rdzv.nodes.min * options_.nproc, options_.rdzv.nodes.max * options_.nproc};
  placement.world_size = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].ticket == record_.ticket) {
      placement.node_index = static_cast<int>(i);
      placement.first_rank = placement.world_size;
    }
    placement.world_size += members[i].nproc;
  }
  log::info("canopy-run: {} is node {} of {}, ranks {} to {} of {}", record_.describe(), placement.node_index,
            members.size(), placement.first_rank, placement.first_rank + options_.nproc - 1,
            placement.world_size);
  return placement;
}

NodePlacement NodeRendezvous::join_running_job(const std::vector<Member>& members,
                                               const std::function<int()>& stop_signal) {
  const std::string job = fmt::format("the job '{}' ({})", options_.rdzv.id, address_);
  const Deadline deadline = Deadline::after(options_.rdzv.join_timeout);
  NodeCensus census(shared_);
  // A full job may have room in a moment: a lost node's record lapses one TTL after its launcher died, and a
  // node sent to replace it often comes sooner. A record's end cannot be watched through the store, so the
  // count is taken again once a slice.
  std::vector<NodeRecord> others;
  for (bool told = false;; told = true) {
    if (shared_->check({node_keys::kFinished}))
      fail(ErrorCode::Config,
           "{} has finished, or is finishing (a node's ranks have finished): no node joins it now; a new job "
           "needs a --rdzv-id of its own",
           job);
    others = census.count().live;
    std::erase_if(others, [&](const NodeRecord& node) { return node.ticket == record_.ticket; });
    if (others.empty())
      fail(ErrorCode::Config,
           "{} has no live node left: it has ended or failed; a new job needs a --rdzv-id of its own", job);
    if (others.size() < static_cast<std::size_t>(options_.rdzv.nodes.max)) break;
    if (deadline.expired())
      fail(ErrorCode::Timeout, "{} ran on {} for {} s (--rdzv-conf join_timeout), the MAX of --nnodes {}: {}",
           job, nodes_text(others.size()),
           std::chrono::duration_cast<std::chrono::seconds>(options_.rdzv.join_timeout).count(),
           options_.rdzv.nodes.text(), describe_nodes(others));
    if (!told)
      report("{} runs on {}, the MAX of --nnodes {}: this node waits for one of them to end ({})", job,
             nodes_text(others.size()), options_.rdzv.nodes.text(), describe_nodes(others));
    if (int signal = stop_signal(); signal != 0) throw RendezvousStopped{signal};
    std::this_thread::sleep_for(
        std::min(kWaitSlice, std::chrono::duration_cast<Duration>(deadline.remaining())));
  }
  if (record_.ticket == 0) take_ticket();
  int listed_ranks = 0;
  for (const Member& m : members) listed_ranks += m.nproc;
  const auto joined = static_cast<int>(shared_->add(node_keys::kJoinedRanks, options_.nproc));
  NodePlacement placement;
  placement.store_address = address_;
  placement.job_ranks = {options_.rdzv.nodes.min * options_.nproc, options_.rdzv.nodes.max * options_.nproc};
  placement.joins = true;
  // Labels only (the grow decides the ranks): after the list's ranks and every earlier newcomer's.
  placement.node_index = static_cast<int>(record_.ticket - 1);
  placement.first_rank = listed_ranks + joined - options_.nproc;
  placement.world_size = placement.first_rank + options_.nproc;
  log::info("canopy-run: {} joins {} beside {}", record_.describe(), job, describe_nodes(others));
  return placement;
}

void NodeRendezvous::mark_finished() {
  try {
    shared_->compare_set(node_keys::kFinished, "", std::to_string(record_.ticket));
  } catch (const std::exception& e) {
    log::warn("canopy-run: could not tell the other nodes in {} that this node finished: {}", address_,
              e.what());
  }
}

std::shared_ptr<Store> NodeRendezvous::another_handle(Duration timeout) {
  return shared_->open_another(timeout);
}

std::string NodeRendezvous::encode(const std::vector<NodeRecord>& nodes) {
  std::string text;
  for (const NodeRecord& node : nodes) text += fmt::format("{} {}\n", node.ticket, node.nproc);
  return text;
}

std::vector<NodeRendezvous::Member> NodeRendezvous::decode(const std::string& text) {
  std::vector<Member> members;
  std::istringstream lines(text);
  Member m;
  while (lines >> m.ticket >> m.nproc) members.push_back(m);
  if (members.empty() || !lines.eof())
    fail(ErrorCode::Protocol, "canopy-run: the member list in the store is not '<ticket> <nproc>' lines: {}",
         text.substr(0, 80));
  return members;
}

}  // namespace canopy::launcher
