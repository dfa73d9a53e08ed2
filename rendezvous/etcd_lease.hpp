// An etcd lease this process keeps alive: keys written with it vanish once the process stops renewing it
// (it died, or its host did), `ttl` after the last renewal. A thread renews it three times a TTL.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "canopy/store.hpp"
#include "common/deadline.hpp"

namespace canopy::rendezvous {

class EtcdClient;

class EtcdLease {
 public:
  // Grants the lease (by `deadline`) and starts renewing it.
  EtcdLease(std::shared_ptr<EtcdClient> client, Duration ttl, Deadline deadline);
  // Stops renewing without revoking: the keys stay for up to one TTL more (a rank that ends cleanly leaves
  // its keys to the ranks still reading them; a dead one's go when the lease expires).
  ~EtcdLease();
  EtcdLease(const EtcdLease&) = delete;
  EtcdLease& operator=(const EtcdLease&) = delete;

  std::int64_t id() const { return id_; }
  Duration ttl() const { return ttl_; }

 private:
  void renew_until_stopped();

  std::shared_ptr<EtcdClient> client_;
  Duration ttl_;
  std::int64_t id_ = 0;
  std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;
  std::thread renewer_;
};

}  // namespace canopy::rendezvous
