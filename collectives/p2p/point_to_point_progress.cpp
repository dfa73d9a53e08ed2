// How the communicator's progress thread drives the point-to-point engine (point_to_point.hpp): as its side
// work between asynchronous collectives, waiting in this engine's poll(), and as the companion of a
// collective's transport while one runs, stepped without waiting. Either way it takes up the operations
// posted since, moves the transport, and handles what completed.
#include "collectives/p2p/point_to_point.hpp"
#include "common/error.hpp"

namespace canopy::collectives {
namespace {

constexpr int kRoundsPerStep = 4;  // transport rounds a companion step takes at most

}  // namespace

bool PointToPoint::busy() {
  return has_requests_.load() || !in_transport_.empty();
}

void PointToPoint::progress_once() {
  serve_requests();
  drive(earliest_deadline());
  expire_overdue();
}

void PointToPoint::wake() {
  transport_->wake();
}

void PointToPoint::step() {
  serve_requests();
  // A message is two frames (descriptor, then payload, whose receive is posted when the descriptor lands):
  // a few rounds in one step, so that it need not wait for the collective's next piece of work in between.
  for (int round = 0; round < kRoundsPerStep && drive(Deadline(Clock::time_point::min())); ++round) {
  }
  expire_overdue();
}

bool PointToPoint::add_poll_descriptors(std::vector<pollfd>& fds) {
  return transport_->add_poll_descriptors(fds);
}

void PointToPoint::after_poll(std::span<const pollfd> fds) {
  transport_->after_poll(fds);
}

void PointToPoint::serve_requests() {
  if (!has_requests_.load()) return;
  std::vector<OpIndex> accepted;
  {
    std::lock_guard lock(mutex_);
    for (OpIndex index : requests_) {
      auto node = inbox_.extract(index);
      operations_.insert(std::move(node));
      accepted.push_back(index);
    }
    requests_.clear();
    has_requests_.store(false);
  }
  if (!listening_ && !failure_) {
    listening_ = true;
    try {
      // Only the higher ranks may send first: with links made on first use the higher rank of a pair
      // dials, so a receive from a lower one would dial it, and a group of thousands would connect
      // everyone. A lower rank's messages are read once this rank has an operation with it (MPI lets a
      // send wait for its receive).
      for (int peer = rank_ + 1; peer < static_cast<int>(peers_.size()); ++peer) listen_to(peer);
    } catch (const Error& error) {
      fail_all(error);
    }
  }
  for (OpIndex index : accepted) {
    try {
      if (failure_) throw *failure_;
      if (operations_.at(index).direction == Direction::Send) {
        start_send(index);
      } else {
        start_recv(index);
      }
    } catch (const Error& error) {
      fail_all(error);
    }
  }
}

bool PointToPoint::drive(Deadline deadline) {
  if (in_transport_.empty()) return false;
  completed_.clear();
  std::optional<transport::PeerFailedError> peer_failure;
  std::optional<Error> failure;
  try {
    transport_->progress(deadline, completed_);
  } catch (const transport::PeerFailedError& error) {
    peer_failure = error;
  } catch (const Error& error) {
    failure = error;
  }
  // What completed before a failure still counts: a message that fully arrived may be received.
  try {
    for (transport::OpId id : completed_) on_completed(id);
  } catch (const Error& error) {
    if (!failure) failure = error;
  }
  if (peer_failure) peer_left(*peer_failure);
  if (failure) fail_all(*failure);
  return !completed_.empty() && !failure && !peer_failure;
}

}  // namespace canopy::collectives
