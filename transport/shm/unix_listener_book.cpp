#include "transport/shm/unix_listener_book.hpp"

#include <fmt/format.h>
#include <sstream>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/process_identity.hpp"
#include "transport/shm/unix_socket.hpp"

namespace canopy::transport {
namespace {

constexpr const char* kUnknownSpace = "?";

}  // namespace

UnixListenerBook::UnixListenerBook(int rank, int size, int meshes, Records records)
    : rank_(rank), meshes_(meshes), records_(std::move(records)), space_(this_network_namespace()) {
  for (int mesh = 0; mesh < meshes; ++mesh) {
    std::string name;
    UniqueFd listener;
    try {
      listener = listen_unix(size + 64, name,
                             fmt::format("rank {}'s shared-memory links need a listener for each of its {} "
                                         "meshes while they form, beside the TCP ones",
                                         rank, meshes));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Resource) throw;  // TCP would need descriptors too
      log::warn("rank {}: no shared memory with the ranks of this host: {}", rank, e.what());
    }
    names_.push_back(listener.valid() ? name : std::string(kNoListener));
    listeners_.push_back(std::move(listener));
  }
  if (space_.empty())
    log::info("rank {}: /proc does not say which network namespace this is: TCP carries its messages", rank);
}

std::string UnixListenerBook::part() const {
  std::string text = space_.empty() ? kUnknownSpace : space_;
  for (const std::string& name : names_) text += " " + name;
  return text;
}

UniqueFd UnixListenerBook::take_listener(int mesh) {
  return std::move(listeners_.at(static_cast<std::size_t>(mesh)));
}

std::vector<UnixListenerBook::Peer> UnixListenerBook::read(const std::vector<int>& peers,
                                                           Duration wait) const {
  std::vector<std::string> keys;
  for (int peer : peers) keys.push_back(records_.key_of(peer));
  const std::vector<std::string> values =
      peers.empty() ? std::vector<std::string>{} : records_.store->get_many(keys, wait);
  std::vector<Peer> read;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    std::istringstream words(records_.part_of(values[i], peers[i]));
    Peer peer;
    words >> peer.space;
    for (std::string name; words >> name;) peer.names.push_back(name);
    if (static_cast<int>(peer.names.size()) != meshes_)
      fail(ErrorCode::Protocol,
           "rank {}: rank {}'s record in the store ('{}') holds {} shared-memory listener names, not {}: "
           "does every rank run the same Canopy with the same CANOPY_TRANSPORT?",
           rank_, peers[i], keys[i], peer.names.size(), meshes_);
    read.push_back(std::move(peer));
  }
  return read;
}

}  // namespace canopy::transport
