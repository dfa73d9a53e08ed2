// Where a communicator's ranks published their records (collectives/forming/host_layout_exchange.hpp), as the
// address books of its meshes read them: the TCP listener's address (tcp/tcp_address_book.hpp) and the Unix
// listeners' names (shm/unix_listener_book.hpp) are each a part of one record a rank.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "canopy/store.hpp"

namespace canopy::transport {

struct RankRecords {
  std::shared_ptr<Store> store;
  std::function<std::string(int rank)> key_of;
  // The book's part of a record (empty: the rank has none); Error(Protocol) for a malformed record.
  std::function<std::string(const std::string& record, int rank)> part_of;
};

}  // namespace canopy::transport
