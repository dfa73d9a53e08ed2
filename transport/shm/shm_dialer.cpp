#include "transport/shm/shm_dialer.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {
namespace {

ShmDialer::Outcome left_to_network(int peer, std::string why) {
  ShmDialer::Outcome outcome;
  outcome.peer = peer;
  outcome.network = std::move(why);
  return outcome;
}

}  // namespace

ShmDialer::ShmDialer(const ShmOptions& options, int rank, int size, int doorbell, UniqueFd listener,
                     std::vector<std::string> names, std::vector<bool> later)
    : options_(options),
      me_{.rank = rank, .size = size, .options = &options_, .doorbell = doorbell},
      listener_(std::move(listener)),
      names_(std::move(names)),
      later_(std::move(later)),
      requested_(static_cast<std::size_t>(size), false),
      linked_(static_cast<std::size_t>(size), false) {}

std::string ShmDialer::need() const {
  return fmt::format(
      "rank {}'s shared-memory links need 2 descriptors for each peer it talks to on its host (a socket and "
      "the peer's doorbell), its own doorbell and a listener",
      me_.rank);
}

bool ShmDialer::expects(int peer) const {
  return peer > me_.rank && peer < me_.size && later_[static_cast<std::size_t>(peer)] &&
         !linked_[static_cast<std::size_t>(peer)];
}

void ShmDialer::taken(int peer) {
  linked_[static_cast<std::size_t>(peer)] = true;
  if (requested_[static_cast<std::size_t>(peer)]) --awaited_;
}

void ShmDialer::request(int peer) {
  if (requested_[static_cast<std::size_t>(peer)]) return;
  requested_[static_cast<std::size_t>(peer)] = true;
  if (peer > me_.rank && !linked_[static_cast<std::size_t>(peer)]) ++awaited_;
  if (peer < me_.rank && !linked_[static_cast<std::size_t>(peer)]) {
    int error = 0;
    UniqueFd socket = say_shm_hello(me_, names_[static_cast<std::size_t>(peer)], error, need());
    // It expects this rank: a socket that cannot be reached in one namespace is a failure, not a choice.
    if (!socket.valid())
      throw PeerFailedError(peer,
                            fmt::format("rank {}: rank {} of this host shares its network namespace, but "
                                        "its shared-memory socket could not be reached ({}; did rank {} "
                                        "exit or crash?)",
                                        me_.rank, peer, std::strerror(error), peer));
    dials_.push_back(Dial{peer, std::move(socket)});
  }
}

void ShmDialer::drive(std::vector<Outcome>& outcomes) {
  for (std::size_t i = dials_.size(); i-- > 0;) {
    Dial& dial = dials_[i];
    ShmAnswer answer = hear_shm_answer(dial.socket.get(), dial.peer);
    if (!answer.came) continue;
    Outcome outcome;
    outcome.peer = dial.peer;
    if (answer.accepted)
      outcome.link = ShmPeerLink{std::move(dial.socket), std::move(answer.doorbell)};
    else if (answer.refused)
      outcome.network = answer.why;
    else
      outcome.failure = PeerFailedError(
          dial.peer, fmt::format("rank {}: rank {} of this host closed its shared-memory socket: {} (did it "
                                 "exit or crash?)",
                                 me_.rank, dial.peer, answer.why));
    linked_[static_cast<std::size_t>(dial.peer)] = true;
    outcomes.push_back(std::move(outcome));
    dials_.erase(dials_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (listener_.valid() && (listener_ready_ || awaited_ > 0)) accept_pending();
  listener_ready_ = false;
  const auto expected = [this](int peer) { return expects(peer); };
  for (std::size_t i = inbound_.size(); i-- > 0;) {
    ShmHello heard = answer_shm_hello(me_, inbound_[i].socket.get(), expected);
    if (heard.step == ShmHello::Step::NotYet) {
      if (Clock::now() < inbound_[i].give_up) continue;
      log::warn("rank {}: dropped a shared-memory connection: no complete hello within {} ms", me_.rank,
                options_.handshake_timeout.count());
    } else if (heard.step == ShmHello::Step::Refused && heard.peer >= 0 && expects(heard.peer)) {
      taken(heard.peer);
      outcomes.push_back(left_to_network(heard.peer, "it is another user"));
    } else if (heard.step == ShmHello::Step::Accepted) {
      taken(heard.peer);
      if (heard.answer_error == 0) {
        Outcome outcome;
        outcome.peer = heard.peer;
        outcome.link = ShmPeerLink{std::move(inbound_[i].socket), std::move(heard.doorbell)};
        outcomes.push_back(std::move(outcome));
      } else {
        // It introduced itself and left: the network's links carry its messages and say what became of it.
        outcomes.push_back(left_to_network(
            heard.peer,
            fmt::format("it closed its socket before the answer ({})", std::strerror(heard.answer_error))));
      }
    }
    inbound_.erase(inbound_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void ShmDialer::accept_pending() {
  for (;;) {
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      inbound_.push_back(Inbound{UniqueFd(fd), Clock::now() + options_.handshake_timeout});
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (out_of_descriptors(errno) && inbound_.empty())
      fail_descriptor_call(fmt::format("rank {}: shared memory: accept() of this host's ranks", me_.rank),
                           errno, need());
    return;  // EAGAIN; out of descriptors with a hello under way, which may end and free one
  }
}

void ShmDialer::prepare_to_block(std::vector<pollfd>& fds, Clock::time_point& wake_by) {
  if (listener_.valid()) fds.push_back({listener_.get(), POLLIN, 0});
  for (const Dial& dial : dials_) fds.push_back({dial.socket.get(), POLLIN, 0});
  for (const Inbound& in : inbound_) {
    fds.push_back({in.socket.get(), POLLIN, 0});
    wake_by = std::min(wake_by, in.give_up);
  }
}

void ShmDialer::after_poll(std::span<const pollfd> fds) {
  listener_ready_ = listener_.valid() && !fds.empty() && fds[0].revents != 0;
}

}  // namespace canopy::transport
