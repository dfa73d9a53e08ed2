#include "transport/transport.hpp"

#include <algorithm>

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

void send(Transport& transport, int peer, const Envelope& envelope, std::span<const std::byte> payload,
          Deadline deadline) {
  wait_for(transport, transport.post_send(peer, envelope, payload), deadline, "send to", peer);
}

void recv(Transport& transport, int peer, const Envelope& envelope, std::span<std::byte> destination,
          Deadline deadline) {
  wait_for(transport, transport.post_recv(peer, envelope, destination), deadline, "receive from", peer);
}

}  // namespace canopy::transport
