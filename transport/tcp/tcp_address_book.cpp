#include "transport/tcp/tcp_address_book.hpp"

#include <fmt/format.h>

#include <sstream>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/tcp/interfaces.hpp"

namespace canopy::transport {

TcpAddressBook::TcpAddressBook(int rank, int size, int meshes, const TcpOptions& options, Records records,
                               std::shared_ptr<TcpListener> listener)
    : rank_(rank),
      meshes_(meshes),
      records_(std::move(records)),
      listener_(std::move(listener)),
      known_(static_cast<std::size_t>(size)) {
  if (listener_) {
    log::info(
        "rank {}: comm {}'s {} TCP meshes listen on {}, the rank's listener, published in its layout "
        "record",
        rank_, options.comm_id, meshes, listener_->address());
    return;
  }
  const InterfaceAddress chosen =
      choose_interface(list_interfaces(), options.socket_ifname, options.socket_family);
  // As a TcpConnector's own listener: the backlog holds every peer of every mesh that may dial at once.
  UniqueFd listening =
      listen_on(chosen.address, meshes * size + 64, tcp_descriptor_need(rank, size, meshes, options.comm_id));
  std::string address = SocketAddress::local_of(listening.get()).to_string();
  listener_ = TcpListener::make(rank, std::move(listening), std::move(address), options.handshake_timeout);
  log::info(
      "rank {}: listening on {} (interface {}{}) for comm {}'s {} meshes, published in its layout record",
      rank_, listener_->address(), chosen.name,
      options.socket_ifname.empty() ? ", the default choice" : ", from CANOPY_SOCKET_IFNAME", options.comm_id,
      meshes);
}

TcpAddressBook::TcpAddressBook(std::shared_ptr<TcpAddressBook> parent, std::vector<int> members)
    : rank_(parent->rank_),
      meshes_(parent->meshes_),
      records_(parent->records_),
      parent_(std::move(parent)),
      members_(std::move(members)),
      listener_(parent_->listener_) {}

std::string TcpAddressBook::key_of(int peer) const {
  if (parent_) return parent_->key_of(members_.at(static_cast<std::size_t>(peer)));
  return records_.key_of(peer);
}

bool TcpAddressBook::read(const std::vector<int>& peers, Duration wait) {
  if (parent_) {
    std::vector<int> theirs;
    for (int peer : peers) theirs.push_back(members_.at(static_cast<std::size_t>(peer)));
    return parent_->read(theirs, wait);
  }
  std::vector<int> unknown;
  {
    std::lock_guard lock(mutex_);
    for (int peer : peers)
      if (known_.at(static_cast<std::size_t>(peer)).empty()) unknown.push_back(peer);
  }
  if (unknown.empty()) return true;
  std::vector<std::string> keys;
  for (int peer : unknown) keys.push_back(records_.key_of(peer));
  std::vector<std::string> values;
  try {
    values = records_.store->get_many(keys, wait);  // outside the lock: the other mesh's thread goes on
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    return false;
  }
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < unknown.size(); ++i) {
    std::vector<std::string> addresses;
    std::istringstream words(records_.part_of(values[i], unknown[i]));
    for (std::string address; words >> address;) addresses.push_back(address);
    if (addresses.size() != 1)
      fail(
          ErrorCode::Protocol,
          "rank {}: rank {}'s record in the store ('{}') holds {} TCP listening addresses, not 1: does every "
          "rank run the same Canopy with the same CANOPY_TRANSPORT?",
          rank_, unknown[i], keys[i], addresses.size());
    known_[static_cast<std::size_t>(unknown[i])] = std::move(addresses.front());
  }
  return true;
}

std::optional<std::string> TcpAddressBook::address_of(int peer) const {
  if (parent_) return parent_->address_of(members_.at(static_cast<std::size_t>(peer)));
  std::lock_guard lock(mutex_);
  const std::string& address = known_.at(static_cast<std::size_t>(peer));
  if (address.empty()) return std::nullopt;
  return address;
}

}  // namespace canopy::transport
