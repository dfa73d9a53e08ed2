#include "rendezvous/etcd_lease.hpp"

#include <fmt/format.h>

#include <chrono>

#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/etcd_client.hpp"

namespace canopy::rendezvous {

EtcdLease::EtcdLease(std::shared_ptr<EtcdClient> client, Duration ttl, Deadline deadline)
    : client_(std::move(client)), ttl_(ttl) {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(ttl).count();
  if (seconds < 1)
    fail(ErrorCode::InvalidArgument, "etcd store: a lease of {} ms is shorter than etcd's least TTL, 1 s",
         ttl.count());
  auto answer =
      client_->call("/v3/lease/grant", {{"TTL", std::to_string(seconds)}}, deadline, "granting a lease");
  id_ = json_int(answer, "ID");
  if (id_ == 0)
    fail(ErrorCode::Protocol, "etcd store: granting a lease on {} returned no lease id: {}",
         client_->describe(), answer.dump());
  renewer_ = std::thread([this] { renew_until_stopped(); });
}

EtcdLease::~EtcdLease() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_all();
  renewer_.join();
}

void EtcdLease::renew_until_stopped() {
  const auto period = ttl_ / 3;
  bool failing = false;  // one warning an outage, not one a renewal
  Clock::time_point failing_since{};
  std::unique_lock lock(mutex_);
  while (!stop_requested_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    try {
      // A renewal may take up to a period, failing over between members, before the next is due.
      auto answer = client_->call("/v3/lease/keepalive", {{"ID", std::to_string(id_)}},
                                  Deadline::after(period), "renewing a lease");
      auto result = answer.find("result");
      if (result == answer.end() || json_int(*result, "TTL") <= 0) {
        log::warn("etcd store: lease {:x} on {} has expired: the keys written with it are gone", id_,
                  client_->describe());
        return;  // writes with it now fail with etcd's "requested lease not found"
      }
      if (failing)
        log::warn("etcd store: lease {:x} renewed again, after {:.1f} s of failed renewals", id_,
                  std::chrono::duration<double>(Clock::now() - failing_since).count());
      failing = false;
    } catch (const Error& e) {
      if (!failing)
        log::warn("etcd store: renewing lease {:x} failed (retrying every {} ms, quietly): {}", id_,
                  std::chrono::duration_cast<std::chrono::milliseconds>(period).count(), e.what());
      if (!failing) failing_since = Clock::now();
      failing = true;
    }
    lock.lock();
  }
}

}  // namespace canopy::rendezvous
