// Joining the ranks of one host in shared memory: the set-up of the pairs whose messages a mesh carries in
// rings (link_mesh.hpp builds the mesh around them).
//
// Which peers share this host comes from the communicator's host layout (MeshOptions::host_of_rank), never
// from a launcher's local world size; that they really share a kernel (and so the rings' memory) is then
// proven by reaching each other's abstract Unix socket, which exists only within one network namespace of
// one kernel, and by the handshake on it (the job token, the same user). A pair that fails either uses the
// network's links (verbs or TCP: link_mesh.hpp).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "transport/link_mesh.hpp"
#include "transport/shm/shm_dialer.hpp"
#include "transport/shm/shm_links.hpp"
#include "transport/shm/shm_options.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

struct ShmPeers {
  UniqueFd doorbell;               // this rank's, given to every peer reached
  std::vector<ShmPeerLink> links;  // by rank; invalid where the peer is not reached (yet)
  std::vector<int> reached;        // the peers with a link now, in rank order
  // The peers whose messages go through shared memory, in rank order: those reached, and those whose links
  // `dialer` makes when a message first needs them (null where every link was made now).
  std::vector<int> sharing;
  std::unique_ptr<ShmDialer> dialer;
};

// Every rank calls this after its TCP links (where made before use) are up. The ranks of a host agree through
// the lowest of them (rendezvous::agree_through_rank_zero's pattern, among the host's ranks only) on every
// one's listener name
// ("shm/<comm_id>/socket/<rank>", gathered into "shm/<comm_id>/socket/host/<lowest>"), then on which lower
// ranks each could not reach ("shm/<comm_id>/unreached/<rank>", gathered likewise): two store requests a
// rank for each, three for the lowest, however many ranks the host has. A rank connects to the lower ranks
// of its host and accepts the higher ones that reached it, as the TCP mesh does, so the waits form no
// cycle. With ShmOptions::unix_listener_book (a communicator's meshes) there is no agreement: the names and
// network namespaces come from the ranks' records, and a pair meets where both share a namespace; with
// ShmOptions::links_on_first_use too, no pair meets now but those the host's cells are agreed over (every
// rank with rank 0, where the group gets cells: share_host_cells), and the dialer makes the others' links on
// first use. Throws Error(Timeout) naming the ranks that never answered.
ShmPeers connect_shm_peers(Store& store, int rank, int size, const ShmOptions& options);

// A view of `store` whose waits end at `deadline` at the latest: what a set-up with one deadline for all its
// steps hands rendezvous::agree_through_rank_zero, whose waits take the store's timeout. Every call goes to
// `store`, so requests_sent() is its count.
class StoreUntil final : public Store {
 public:
  StoreUntil(Store& store, Deadline deadline) : store_(store), deadline_(deadline) {}
  void set(std::string_view key, std::string_view value) override { store_.set(key, value); }
  std::string get(std::string_view key, Duration timeout) override { return store_.get(key, bound(timeout)); }
  std::int64_t add(std::string_view key, std::int64_t delta) override { return store_.add(key, delta); }
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override {
    return store_.compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return store_.check(keys); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    store_.wait(keys, bound(timeout));
  }
  bool remove(std::string_view key) override { return store_.remove(key); }
  std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) override {
    return store_.get_many(keys, bound(timeout));
  }
  std::uint64_t requests_sent() const override { return store_.requests_sent(); }
  using Store::get;
  using Store::get_many;
  using Store::wait;

 private:
  Duration bound(Duration timeout) const {
    return std::min(timeout, std::chrono::duration_cast<Duration>(deadline_.remaining()));
  }
  Store& store_;
  const Deadline deadline_;
};

// For the message of a rank that waited in vain for an agreement's answer: which of `keys` (every rank's
// contribution) never appeared, or, where all did, that rank `gatherer`, which gathers them, never
// answered. One store request, made only once the wait failed.
std::string why_no_agreement(Store& store, const std::vector<std::string>& keys, int gatherer);

}  // namespace canopy::transport
