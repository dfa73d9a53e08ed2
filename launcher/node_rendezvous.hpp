// How the launchers of a --rdzv-backend etcd job agree which nodes are in (docs/LAUNCHER.md, "Elastic
// across nodes"): each takes a node ticket and publishes its record (node_census.hpp); once MIN nodes are
// there, each waits a short last call for more, up to MAX, and the first to compare_set the member list
// fixes it. Global ranks follow the list's order. A node that comes after the list was fixed joins the
// running job: its ranks start with CANOPY_ELASTIC_JOIN=1 and the members admit them at their next grow.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/node_census.hpp"

namespace canopy::launcher {

// A stop request (SIGINT, SIGTERM, SIGHUP) that arrived while the launchers were meeting.
struct RendezvousStopped {
  int signal = 0;
};

class NodeRendezvous {
 public:
  // Connects to the job's etcd store (etcd_job_address) twice: once for the keys the job shares, and once
  // with a lease of --rdzv-conf node_ttl for this node's record. Throws canopy::Error naming the store.
  NodeRendezvous(const LaunchOptions& options, const std::string& job_token);
  // Removes this node's record, so that the others count it gone at once rather than one TTL later.
  ~NodeRendezvous();
  NodeRendezvous(const NodeRendezvous&) = delete;
  NodeRendezvous& operator=(const NodeRendezvous&) = delete;

  // Meets the other nodes and returns this node's place. `stop_signal` is asked between waits (at least
  // once a second) and a signal number it returns ends the meeting with RendezvousStopped. A node that
  // finds the job running on MAX nodes waits for room. Throws Error(Timeout) when MIN nodes do not meet,
  // or no room comes, within join_timeout; Error(Config) when the job cannot take this node (it is
  // finishing, or has no live node left: a used --rdzv-id).
  NodePlacement meet(const std::function<int()>& stop_signal);

  // This node's ranks finished: the job is ending, and the other nodes must not count this node's end
  // as a loss. Never throws (logged).
  void mark_finished();

  // A handle on the job's store for counting its nodes from another thread, its calls bounded by `timeout`.
  std::shared_ptr<Store> another_handle(Duration timeout);

  std::uint64_t ticket() const { return record_.ticket; }

 private:
  struct Member {
    std::uint64_t ticket = 0;
    int nproc = 0;
  };
  void take_ticket();
  // Counts the live nodes until there are `want`, the members are fixed, or `deadline` passes.
  std::vector<NodeRecord> wait_for_nodes(NodeCensus& census, std::size_t want, Deadline deadline,
                                         const std::function<int()>& stop_signal);
  NodePlacement place_member(const std::vector<Member>& members) const;
  NodePlacement join_running_job(const std::vector<Member>& members, const std::function<int()>& stop_signal);
  static std::string encode(const std::vector<NodeRecord>& nodes);
  static std::vector<Member> decode(const std::string& text);

  const LaunchOptions& options_;
  std::string address_;
  std::shared_ptr<Store> shared_;  // the job's keys
  std::shared_ptr<Store> own_;     // this node's record, on a lease
  NodeRecord record_;              // ticket 0 until taken
};

}  // namespace canopy::launcher
