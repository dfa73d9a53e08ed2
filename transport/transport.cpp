#include "transport/transport.hpp"

#include <algorithm>
#include <cerrno>

#include "common/error.hpp"

namespace canopy::transport {
namespace {

void wait_for(Transport& transport, OpId id, Deadline deadline, std::string_view what, int peer) {
  std::vector<OpId> completed;
  for (;;) {
    if (!transport.progress(deadline, completed))
      fail(ErrorCode::Timeout, "rank {}: {} rank {} did not complete before the deadline", transport.rank(), what,
           peer);
    if (std::find(completed.begin(), completed.end(), id) != completed.end()) return;
  }
}

}  // namespace

OpId Transport::post_recv_in_place(int peer, const Envelope& envelope, std::uint64_t bytes, PieceSink& sink) {
  (void)envelope, (void)bytes, (void)sink;
  fail(ErrorCode::InvalidArgument, "rank {}: {} cannot receive from rank {} in place", rank(), name(), peer);
}

bool Transport::add_poll_descriptors(std::vector<pollfd>& fds) {
  (void)fds;
  fail(ErrorCode::InvalidArgument, "rank {}: {} cannot be waited on in another's poll()", rank(), name());
}

void Transport::set_companion(Companion* companion) {
  if (companion != nullptr)
    fail(ErrorCode::InvalidArgument, "rank {}: {} cannot keep a companion moving", rank(), name());
}

int poll_beside(std::vector<pollfd>& fds, Companion* companion, Deadline deadline) {
  const std::size_t own = fds.size();
  if (companion != nullptr) {
    // One that can move already keeps the poll from sleeping.
    if (!companion->add_poll_descriptors(fds)) deadline = Deadline(Clock::now());
    deadline = deadline.earlier(companion->wake_by());
  }
  int ready = ::poll(fds.data(), fds.size(), deadline.poll_timeout_ms());
  const int error = errno;
  if (ready < 0)
    for (auto& fd : fds) fd.revents = 0;
  if (companion != nullptr) {
    companion->after_poll(std::span(fds).subspan(own));
    companion->step();
    fds.resize(own);
    if (ready > 0)
      ready = static_cast<int>(
          std::count_if(fds.begin(), fds.end(), [](const pollfd& fd) { return fd.revents != 0; }));
  }
  errno = error;
  return ready;
}

void send(Transport& transport, int peer, const Envelope& envelope, std::span<const std::byte> payload,
          Deadline deadline) {
  wait_for(transport, transport.post_send(peer, envelope, payload), deadline, "send to", peer);
}

void recv(Transport& transport, int peer, const Envelope& envelope, std::span<std::byte> destination,
          Deadline deadline) {
  wait_for(transport, transport.post_recv(peer, envelope, destination), deadline, "receive from", peer);
}

}  // namespace canopy::transport
