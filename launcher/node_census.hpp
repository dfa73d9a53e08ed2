// The nodes of a job that met through the store (--rdzv-backend etcd), as the store sees them: each
// launcher takes a ticket and keeps a record of itself under it, written with an etcd lease that it
// renews, so that the record of a launcher that died (or whose host did, or was cut off) expires by itself
// one TTL later. Counting the records that exist is counting the live nodes. The keys live in the job's
// store beside the ranks' "round/<n>" keys, under "canopy-run/".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "common/deadline.hpp"

namespace canopy::launcher {

namespace node_keys {
inline constexpr const char* kTickets = "canopy-run/tickets";           // add counter: one ticket a node
inline constexpr const char* kMembers = "canopy-run/members";           // the list fixed at the start
inline constexpr const char* kJoinedRanks = "canopy-run/joined-ranks";  // add counter: ranks of later nodes
inline constexpr const char* kFinished = "canopy-run/finished";         // the first node whose ranks finished
std::string record(std::uint64_t ticket);                               // "canopy-run/node/<ticket>"
}  // namespace node_keys

// What a node says of itself under its ticket: "<nproc> <host>".
struct NodeRecord {
  std::uint64_t ticket = 0;
  int nproc = 0;
  std::string host;  // CANOPY_HOST_ID, else the host name: for messages

  std::string text() const;
  // Error(Protocol) naming the ticket when the text is not a record.
  static NodeRecord parse(std::uint64_t ticket, const std::string& text);
  std::string describe() const;  // "node 'host-a' (ticket 1)"
};

// "1 node", "3 nodes".
std::string nodes_text(std::size_t n);
// "node 'a' (ticket 1), node 'b' (ticket 2)", or "none".
std::string describe_nodes(const std::vector<NodeRecord>& nodes);

// Counts the live nodes: the records that exist among every ticket taken. A record seen once and absent
// later is gone for good (its lease expired, or its launcher removed it); a ticket whose record was never
// seen is not counted yet (its node may be about to write it). Not thread-safe: one user at a time.
class NodeCensus {
 public:
  explicit NodeCensus(std::shared_ptr<Store> store) : store_(std::move(store)) {}

  struct Count {
    std::vector<NodeRecord> live;        // in ticket order
    std::vector<NodeRecord> newly_gone;  // seen before, absent now (since the last count)
  };
  // Two requests while every record seen is there (the ticket counter and one check of them all), one more
  // per record in doubt. Throws what the store throws.
  Count count();

  std::uint64_t tickets_taken();

 private:
  std::shared_ptr<Store> store_;
  std::map<std::uint64_t, NodeRecord> seen_;  // present at the last count
  std::set<std::uint64_t> gone_;
};

}  // namespace canopy::launcher
