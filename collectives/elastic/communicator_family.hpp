// What a communicator and every sub-communicator split from it share, on one rank: the store's server
// (on the rank that hosts it), the first communicator's failure record and liveness monitor, and the list
// of the family's communicators alive, which the monitor aborts when a rank falls silent. Each member
// holds it, so parent and children may be destroyed in any order. A communicator made by shrink() starts
// a family of its own (its monitor watches its own ranks), sharing only the store's server.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "canopy/communicator.hpp"
#include "canopy/store.hpp"
#include "collectives/elastic/first_failure.hpp"
#include "collectives/elastic/join_ticket_count.hpp"
#include "collectives/elastic/liveness_monitor.hpp"

namespace canopy::collectives {

class CommunicatorFamily {
 public:
  CommunicatorFamily() = default;
  ~CommunicatorFamily();  // the monitor stops first, the store's server last
  CommunicatorFamily(const CommunicatorFamily&) = delete;
  CommunicatorFamily& operator=(const CommunicatorFamily&) = delete;

  // Starts the liveness monitor of the family's first communicator (rank of size); it aborts every member,
  // and keeps the count of join tickets in `job_store` (the job's store) once asked.
  void watch(std::shared_ptr<Store> monitor_store, std::shared_ptr<FirstFailure> first_failure, int rank,
             int size, const LivenessSettings& settings, std::shared_ptr<Store> job_store);
  // Tells the monitor that every member has formed the group (LivenessMonitor::peers_formed).
  void peers_formed() {
    if (liveness_) liveness_->peers_formed();
  }

  void join(Communicator::Impl* member);
  void leave(Communicator::Impl* member);
  // Ends every member alive with `reason` (revokes them when its code is Revoked). Thread-safe.
  void abort_all(const Error& reason);
  // Revokes the members that descend from `ancestor` (its sub-communicators, theirs, ...). Thread-safe.
  void revoke_descendants(const Communicator::Impl& ancestor, const std::string& reason);

  // Whether the monitor runs, and its settings: an agreement among survivors reads the heartbeats.
  bool watching() const { return liveness_ != nullptr; }
  // The join tickets handed out, as the monitor last read them; null where no monitor runs.
  JoinTicketCount* join_tickets() const { return join_tickets_.get(); }
  const LivenessSettings& liveness_settings() const { return liveness_settings_; }

  // When this rank hosts the store; shared with the families shrink() starts, which may outlive this one.
  std::shared_ptr<TcpStoreServer> store_server;
  // The first communicator's store handle for failure reports, whose calls are bounded by the heartbeat
  // timeout (open_monitor_store): a failing member never waits long on a store that is gone. Null when the
  // store could not be reached.
  std::shared_ptr<Store> failure_store;

 private:
  std::mutex mutex_;
  std::set<Communicator::Impl*> members_;  // under mutex_
  std::shared_ptr<FirstFailure> first_failure_;
  LivenessSettings liveness_settings_;
  std::unique_ptr<JoinTicketCount> join_tickets_;
  std::unique_ptr<LivenessMonitor> liveness_;  // last: stops before the rest goes
};

}  // namespace canopy::collectives
