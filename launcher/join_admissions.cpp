#include "launcher/join_admissions.hpp"

#include <exception>

#include "common/log.hpp"
#include "common/process_identity.hpp"
#include "launcher/job_store.hpp"
#include "rendezvous/bootstrap.hpp"
#include "rendezvous/join_keys.hpp"

namespace canopy::launcher {
namespace {

// The store is this canopy-run's own: it answers at once or is gone.
constexpr Duration kConnectLimit{3000};

}  // namespace

JoinState JoinAdmissions::state_of(pid_t pid) const {
  try {
    const auto tickets = static_cast<std::uint64_t>(store_->add(rendezvous::kJoinTickets, 0));
    for (std::uint64_t ticket = 1; ticket <= tickets; ++ticket) {
      const std::string process_key = rendezvous::joiner_process_key(ticket);
      if (!store_->check({process_key}) || !names_process(store_->get(process_key, kConnectLimit), pid))
        continue;
      return store_->check({rendezvous::join_plan_key(ticket)}) ? JoinState::Admitted : JoinState::Waiting;
    }
    return JoinState::NoTicket;
  } catch (const std::exception& e) {
    log::info("canopy-run: cannot read the join tickets in the job's store ({}) for pid {}", e.what(), pid);
    return JoinState::NoTicket;
  }
}

JoinQuery admissions_in(std::shared_ptr<Store> store) {
  auto round = std::make_shared<PrefixStore>(std::move(store), rendezvous::round_prefix(0));
  auto admissions = std::make_shared<JoinAdmissions>(std::move(round));
  return [admissions](pid_t pid) { return admissions->state_of(pid); };
}

JoinQuery admissions_of_job(const LaunchOptions& options, const LaunchRound& round) {
  auto admissions = std::make_shared<std::unique_ptr<JoinAdmissions>>();
  return [admissions, host = local_store_host(options), port = round.master_port,
          token = round.job_token](pid_t pid) {
    if (!*admissions) {
      try {
        // An elastic job meets in one round, 0, whatever its replacements' restart counts.
        *admissions = std::make_unique<JoinAdmissions>(std::make_shared<PrefixStore>(
            connect_tcp_store(host, port, token, kConnectLimit), rendezvous::round_prefix(0)));
      } catch (const std::exception& e) {
        log::info("canopy-run: cannot reach the job's store to read its join tickets ({})", e.what());
        return JoinState::NoTicket;
      }
    }
    return (*admissions)->state_of(pid);
  };
}

}  // namespace canopy::launcher
