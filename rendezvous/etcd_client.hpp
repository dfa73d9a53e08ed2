// The requests of etcd's v3 API, as JSON through the members' gRPC gateway (libcurl does the HTTP): one
// request goes to the member that answered last and, when that member cannot answer, to the next one, until
// one answers or the caller's deadline passes; a watch is one streaming response read as its events come.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.hpp"
#include "rendezvous/etcd_address.hpp"

namespace canopy::rendezvous {

class EtcdClient {
 public:
  explicit EtcdClient(EtcdAddress address);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // POSTs `request` to `path` ("/v3/kv/range", "/v3/kv/txn"...) and returns the answer. A member that
  // cannot be reached, times out or answers "unavailable" (no leader, no quorum) is left for the next, in
  // turn, with a pause after each round of them, until `deadline`: then Error(PeerFailed) naming the store,
  // every member and why each failed. etcd's refusal of the request itself (too large, a lease not found)
  // is an Error(InvalidArgument) with etcd's message, at once: another member would refuse it too.
  nlohmann::json call(std::string_view path, const nlohmann::json& request, Deadline deadline,
                      std::string_view what);

  enum class WatchEnd {
    Put,          // the key was written at or after the start revision
    Deadline,     // nothing happened by the deadline
    Interrupted,  // the member went away, or the watch was cancelled or compacted: read the key again
  };
  // Watches `key` from `start_revision` (the revision after the read that found it absent, so that nothing
  // written between the read and the watch is missed) on one member until a PUT of it arrives.
  WatchEnd watch_for_put(std::string_view key, std::int64_t start_revision, Deadline deadline);

  const EtcdAddress& address() const { return address_; }
  // "the etcd store etcd://... (members http://...)", for messages.
  std::string describe() const;

 private:
  struct Handle;  // a curl easy handle, which keeps its connection to a member between requests
  std::unique_ptr<Handle> take_handle();
  void give_back(std::unique_ptr<Handle> handle);

  EtcdAddress address_;
  std::mutex mutex_;                           // guards the two below
  std::vector<std::unique_ptr<Handle>> idle_;  // handles between requests, reused for their connections
  std::size_t preferred_ = 0;                  // the member that answered last
};

// An int64 of etcd's JSON (proto3 writes them as strings; absent means 0).
std::int64_t json_int(const nlohmann::json& object, const char* field);

}  // namespace canopy::rendezvous
