#include "collectives/elastic/communicator_family.hpp"

#include "collectives/communicator_impl.hpp"

namespace canopy::collectives {

CommunicatorFamily::~CommunicatorFamily() {
  liveness_.reset();  // its thread may be aborting members: it ends before anything it uses
  first_failure_.reset();
  store_server.reset();
}

void CommunicatorFamily::watch(std::shared_ptr<Store> monitor_store,
                               std::shared_ptr<FirstFailure> first_failure, int rank, int size,
                               const LivenessSettings& settings, std::shared_ptr<Store> job_store) {
  first_failure_ = std::move(first_failure);
  liveness_settings_ = settings;
  join_tickets_ = std::make_unique<JoinTicketCount>(std::move(job_store), settings.timeout);
  liveness_ = std::make_unique<LivenessMonitor>(
      std::move(monitor_store), *first_failure_, rank, size, settings,
      [this](const Error& why) { abort_all(why); }, [tickets = join_tickets_.get()] { tickets->refresh(); });
}

void CommunicatorFamily::join(Communicator::Impl* member) {
  std::lock_guard lock(mutex_);
  members_.insert(member);
}

void CommunicatorFamily::leave(Communicator::Impl* member) {
  std::lock_guard lock(mutex_);
  members_.erase(member);
}

void CommunicatorFamily::abort_all(const Error& reason) {
  std::lock_guard lock(mutex_);
  for (Communicator::Impl* member : members_) member->end(reason.code(), reason.what());
}

void CommunicatorFamily::revoke_descendants(const Communicator::Impl& ancestor, const std::string& reason) {
  std::lock_guard lock(mutex_);
  for (Communicator::Impl* member : members_)
    if (member->descends_from(ancestor)) member->end(ErrorCode::Revoked, reason);
}

}  // namespace canopy::collectives
