// Where the shared-memory meshes of one communicator find each other when every rank publishes its Unix
// listeners' names once, inside a record of its own (the host layout agreement's:
// collectives/communicator_impl.cpp), as tcp/tcp_address_book.hpp does for TCP: the listeners, made before
// that record is published, and the peers' parts of their records. The part also says which network
// namespace of which kernel the rank runs in: two ranks of one host by the layout reach each other's
// abstract socket exactly when they share one, so both ranks of a pair know from the records alone
// whether they will meet, and no agreement on who could not reach whom is needed.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "common/process_identity.hpp"  // this_network_namespace(), which the book publishes
#include "transport/rank_records.hpp"
#include "transport/tcp/socket.hpp"

namespace canopy::transport {

class UnixListenerBook {
 public:
  // Where the ranks' records are; a record's part is "<namespace> <mesh 0's name> <mesh 1's> ...".
  using Records = RankRecords;
  // What a peer's part says.
  struct Peer {
    std::string space;               // its network namespace and kernel
    std::vector<std::string> names;  // by mesh: its listener's name, or "-" where it has none
  };
  static constexpr const char* kNoListener = "-";

  // Listens for `meshes` meshes (a listener that cannot be made is said at WARN and named "-"; out of
  // descriptors is Error(Resource)).
  UnixListenerBook(int rank, int size, int meshes, Records records);
  UnixListenerBook(const UnixListenerBook&) = delete;
  UnixListenerBook& operator=(const UnixListenerBook&) = delete;

  // This rank's part of its record.
  std::string part() const;
  // Mesh `mesh`'s listener, for its shared-memory set-up: once (invalid afterwards, and where none was
  // made).
  UniqueFd take_listener(int mesh);
  const std::string& name(int mesh) const { return names_[static_cast<std::size_t>(mesh)]; }

  // The parts of `peers`' records, read in one store request (none where the store holds them already:
  // the communicator reads them with the others it needs), waiting at most `wait`. Error(Timeout) when
  // some never came; Error(Protocol) for a malformed part.
  std::vector<Peer> read(const std::vector<int>& peers, Duration wait) const;
  // Whether `peer` (as read) runs in this rank's network namespace: it can reach this rank's listeners.
  bool shares_namespace(const Peer& peer) const { return !space_.empty() && peer.space == space_; }
  int meshes() const { return meshes_; }

 private:
  const int rank_;
  const int meshes_;
  const Records records_;
  std::string space_;  // empty where it cannot be told: no pair with this rank shares memory then
  std::vector<UniqueFd> listeners_;
  std::vector<std::string> names_;
};

}  // namespace canopy::transport
