// ShmLinks' links made when a message first needs them (shm_dialer.hpp), and a direction's move to the
// fallback links (TCP) where a ring cannot be made or the pair does not share memory after all.
#include <sys/socket.h>

#include "common/log.hpp"
#include "transport/shm/shm_links.hpp"
#include "transport/shm/unix_socket.hpp"

namespace canopy::transport {

void ShmLinks::install(int peer, ShmPeerLink link) {
  Peer& p = peers_[peer];
  std::lock_guard lock(links_mutex_);
  p.link = std::move(link);
  p.process = peer_process(p.link.socket.get());
  if (shut_) ::shutdown(p.link.socket.get(), SHUT_RDWR);
}

void ShmLinks::ensure_link(int peer) {
  Peer& p = peers_[peer];
  if (!dialer_ || p.reached() || dialer_->requested(peer)) return;
  try {
    dialer_->request(peer);
  } catch (const PeerFailedError& e) {
    p.failure = Error(e.code(), e.what());
    throw;
  } catch (const Error& e) {
    fail_peer(peer, e.code(), e.what());
  }
}

void ShmLinks::take_links() {
  outcomes_.clear();
  dialer_->drive(outcomes_);
  const ShmDialer::Outcome* failed = nullptr;
  for (ShmDialer::Outcome& outcome : outcomes_) {
    if (outcome.link.socket.valid()) {
      install(outcome.peer, std::move(outcome.link));
    } else if (!outcome.network.empty()) {
      fall_back(outcome.peer, true, outcome.network);
      fall_back(outcome.peer, false, outcome.network);
    } else if (outcome.failure) {
      failed = &outcome;
    }
  }
  if (failed == nullptr) return;
  const std::string what = failed->failure->what();
  try {
    fail_peer(failed->peer, failed->failure->code(), what);
  } catch (const Error&) {
    throw PeerFailedError(failed->peer, what);
  }
}

void ShmLinks::fall_back(int peer, bool sends, const std::string& why) {
  Peer& p = peers_[peer];
  log::warn("rank {}: messages {} rank {} go over TCP, not shared memory: {}", rank_, sends ? "to" : "from",
            peer, why);
  reroute_(peer, sends);
  if (sends) {
    p.out = Way::Fallback;
    p.sending.reset();
    p.probe.reset();
    ShmBudget::rings.release(std::exchange(p.reserved, 0));
    for (; !p.sends.empty(); p.sends.pop_front()) {
      const SendOp& op = p.sends.front();
      fallback_.post_send(op.id, peer, op.envelope, op.payload);
    }
    return;
  }
  p.in = Way::Fallback;
  p.receiving.reset();
  for (; !p.recvs.empty(); p.recvs.pop_front()) {
    const RecvOp& op = p.recvs.front();  // none in place: those wait for a ring
    fallback_.post_recv(op.id, peer, op.envelope, std::span(op.destination, op.bytes));
  }
}

}  // namespace canopy::transport
