#include "transport/tcp/tcp_address_book.hpp"

#include <fmt/format.h>

#include <sstream>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/tcp/interfaces.hpp"

namespace canopy::transport {

TcpAddressBook::TcpAddressBook(int rank, int size, int meshes, const TcpOptions& options, Records records)
    : rank_(rank), meshes_(meshes), records_(std::move(records)), known_(static_cast<std::size_t>(size)) {
  const InterfaceAddress chosen =
      choose_interface(list_interfaces(), options.socket_ifname, options.socket_family);
  for (int mesh = 0; mesh < meshes; ++mesh) {
    // As a TcpConnector's own listener: the backlog holds every peer that may dial at once.
    // What TcpConnector::need() says, for the mesh whose listener this is.
    listeners_.push_back(listen_on(
        chosen.address, size + 64,
        fmt::format(
            "rank {}'s TCP mesh of {} ranks (comm {}) needs {} descriptors to hold a link with every "
            "peer: a socket for each of its {} peers, its listener and an eventfd (links made on first "
            "use need one for each peer it has talked to)",
            rank, size, options.comm_id, size + 1, size - 1)));
    own_.push_back(SocketAddress::local_of(listeners_.back().get()).to_string());
  }
  log::info("rank {}: listening on {} (interface {}{}) for comm {}, published in its layout record", rank_,
            addresses(), chosen.name,
            options.socket_ifname.empty() ? ", the default choice" : ", from CANOPY_SOCKET_IFNAME",
            options.comm_id);
}

std::string TcpAddressBook::addresses() const {
  std::string text;
  for (const std::string& address : own_) text += (text.empty() ? "" : " ") + address;
  return text;
}

UniqueFd TcpAddressBook::take_listener(int mesh) {
  return std::move(listeners_.at(static_cast<std::size_t>(mesh)));
}

bool TcpAddressBook::read(const std::vector<int>& peers, Duration wait) {
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
    std::istringstream words(records_.addresses_of(values[i], unknown[i]));
    for (std::string address; words >> address;) addresses.push_back(address);
    if (static_cast<int>(addresses.size()) != meshes_)
      fail(ErrorCode::Protocol,
           "rank {}: rank {}'s record in the store ('{}') holds {} TCP listening addresses, not {}: does "
           "every "
           "rank run the same Canopy with the same CANOPY_TRANSPORT?",
           rank_, unknown[i], keys[i], addresses.size(), meshes_);
    known_[static_cast<std::size_t>(unknown[i])] = std::move(addresses);
  }
  return true;
}

std::optional<std::string> TcpAddressBook::address_of(int peer, int mesh) const {
  std::lock_guard lock(mutex_);
  const std::vector<std::string>& addresses = known_.at(static_cast<std::size_t>(peer));
  if (addresses.empty()) return std::nullopt;
  return addresses[static_cast<std::size_t>(mesh)];
}

}  // namespace canopy::transport
