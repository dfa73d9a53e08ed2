// Where the TCP meshes of one communicator find each other when every rank publishes its listening address
// once, inside a record of its own (the host layout agreement's: collectives/communicator_impl.cpp), instead
// of one store key a mesh ("tcp/<comm>/addr/<rank>", tcp_address_key): the rank's one listener
// (tcp_listener.hpp), which every mesh of the communicator attaches to (the collectives' and the
// point-to-point one), made before that record is published, and the peers' records, each read from the
// store at most once, several in one request, for every mesh. A sub-communicator's book is a view of its
// parent's: the same listener, the same records, ranks renumbered, so forming it publishes and reads
// nothing.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "transport/rank_records.hpp"
#include "transport/tcp/tcp_listener.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {

class TcpAddressBook {
 public:
  // Where the ranks' records are; a record's part is the rank's listening address.
  using Records = RankRecords;

  // For the `meshes` meshes of a group of `size`: listens on the interface that `options` choose
  // (CANOPY_SOCKET_IFNAME, CANOPY_SOCKET_FAMILY), as a TcpConnector of its own would, or takes `listener`
  // (the rank's, from a group it formed before: a shrunk group's survivors).
  TcpAddressBook(int rank, int size, int meshes, const TcpOptions& options, Records records,
                 std::shared_ptr<TcpListener> listener = nullptr);
  // A sub-group's book: its rank r is rank `members[r]` of `parent`'s group.
  TcpAddressBook(std::shared_ptr<TcpAddressBook> parent, std::vector<int> members);
  TcpAddressBook(const TcpAddressBook&) = delete;
  TcpAddressBook& operator=(const TcpAddressBook&) = delete;

  // This rank's listening address: its part of its record.
  const std::string& address() const { return listener_->address(); }
  // The listener every mesh's TcpConnector attaches to.
  const std::shared_ptr<TcpListener>& listener() const { return listener_; }
  // The meshes of the group that use the book, for messages.
  int meshes() const { return meshes_; }

  // Reads the records of those of `peers` that were not read yet, in one store request (none when every one
  // is known), waiting for them at most `wait`. False when some were not there: they stay unknown, and a
  // later call asks again. Thread-safe (the meshes of one communicator are driven by different threads).
  bool read(const std::vector<int>& peers, Duration wait);
  // `peer`'s listening address, once its record was read.
  std::optional<std::string> address_of(int peer) const;
  // The store key of `peer`'s record, for messages.
  std::string key_of(int peer) const;

 private:
  const int rank_;
  const int meshes_;
  const Records records_;
  // A sub-group's: the book its ranks are found in, and its ranks there.
  const std::shared_ptr<TcpAddressBook> parent_;
  const std::vector<int> members_;
  std::shared_ptr<TcpListener> listener_;
  mutable std::mutex mutex_;
  std::vector<std::string> known_;  // by peer: its address, empty until its record was read (not in a view)
};

}  // namespace canopy::transport
