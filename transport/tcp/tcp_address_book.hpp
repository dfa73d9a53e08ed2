// Where the TCP meshes of one communicator find each other when every rank publishes all its listening
// addresses once, inside a record of its own (the host layout agreement's:
// collectives/communicator_impl.cpp), instead of one store key a mesh ("tcp/<comm>/addr/<rank>",
// tcp_address_key): the listeners, made before that record is published, and the peers' records, each read
// from the store at most once, several in one request, for every mesh of the communicator (the collectives'
// and the point-to-point one).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {

class TcpAddressBook {
 public:
  // Where the ranks' records are, and how to find the addresses in one.
  struct Records {
    std::shared_ptr<Store> store;
    std::function<std::string(int rank)> key_of;
    // A record's addresses, "<mesh 0's> <mesh 1's> ..." (empty: it has none); Error(Protocol) for a
    // malformed record.
    std::function<std::string(const std::string& record, int rank)> addresses_of;
  };

  // Listens for `meshes` meshes of a group of `size`, on the interface that `options` choose
  // (CANOPY_SOCKET_IFNAME, CANOPY_SOCKET_FAMILY), as a TcpConnector of its own would.
  TcpAddressBook(int rank, int size, int meshes, const TcpOptions& options, Records records);
  TcpAddressBook(const TcpAddressBook&) = delete;
  TcpAddressBook& operator=(const TcpAddressBook&) = delete;

  // "<mesh 0's address> <mesh 1's> ...": this rank's part of its record.
  std::string addresses() const;
  // This rank's listening address for `mesh`.
  const std::string& address(int mesh) const { return own_[static_cast<std::size_t>(mesh)]; }
  // Mesh `mesh`'s listener, for its TcpConnector: once (invalid afterwards).
  UniqueFd take_listener(int mesh);

  // Reads the records of those of `peers` that were not read yet, in one store request (none when every one
  // is known), waiting for them at most `wait`. False when some were not there: they stay unknown, and a
  // later call asks again. Thread-safe (the point-to-point mesh has a thread of its own).
  bool read(const std::vector<int>& peers, Duration wait);
  // `peer`'s address for `mesh`, once its record was read.
  std::optional<std::string> address_of(int peer, int mesh) const;
  // The store key of `peer`'s record, for messages.
  std::string key_of(int peer) const { return records_.key_of(peer); }

 private:
  const int rank_;
  const int meshes_;
  const Records records_;
  std::vector<UniqueFd> listeners_;
  std::vector<std::string> own_;
  mutable std::mutex mutex_;
  std::vector<std::vector<std::string>> known_;  // by peer: its addresses, empty until its record was read
};

}  // namespace canopy::transport
