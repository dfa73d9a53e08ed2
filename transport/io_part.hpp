// One kind of link a MeshTransport drives: the TCP sockets (tcp/tcp_links.hpp), the shared-memory rings
// (shm/shm_links.hpp) or the RDMA queue pairs (verbs/queue_pairs.hpp). A mesh routes each peer's messages to
// one part, and its progress() drives every part on the calling thread and waits for all of them in one
// poll() (mesh_transport.hpp).
#pragma once

#include <poll.h>

#include <cstdint>
#include <span>
#include <vector>

#include "common/deadline.hpp"
#include "common/error.hpp"
#include "transport/abort_flag.hpp"
#include "transport/envelope.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

// Where a part reports what its I/O brought: the operations that completed, and the flags that messages
// with a payload carried (Transport::take_arrived_flags).
struct Completions {
  std::vector<OpId>& ids;
  std::uint8_t& arrived_flags;
};

class IoPart {
 public:
  // Why a part is driven: the first pass of a progress() (move what needs no readiness: sends, bytes
  // already buffered), a spin (try everything), or after a poll() (what it said is ready).
  enum class Pass { First, Spin, Polled };

  virtual ~IoPart() = default;

  // Queue one message with an id the mesh chose. Throw the peer's failure when it has one.
  virtual void post_send(OpId id, int peer, const Envelope& envelope, std::span<const std::byte> payload) = 0;
  virtual void post_recv(OpId id, int peer, const Envelope& envelope, std::span<std::byte> destination) = 0;
  // Transport::receives_in_place / post_recv_in_place, for the peers this part receives from.
  virtual bool receives_in_place(int peer) const {
    (void)peer;
    return false;
  }
  virtual void post_recv_in_place(OpId id, int peer, const Envelope& envelope, std::uint64_t bytes,
                                  PieceSink& sink) {
    (void)id, (void)envelope, (void)bytes, (void)sink;
    fail(ErrorCode::InvalidArgument, "no in-place receive from rank {} on this link", peer);
  }

  // Whether the messages' frame flags reach the receiver (Transport::carries_flags).
  virtual bool carries_flags() const { return true; }
  // Transport::expect_peers, with the peers this part sends to.
  virtual void expect_peers(std::span<const int> peers) { (void)peers; }
  virtual bool busy() const = 0;
  // Moves what can move now without blocking. Throws the Error (PeerFailedError, Mismatch...) of a peer
  // that failed; what completed before stays in `done`.
  virtual void drive(Pass pass, Completions& done) = 0;
  // Bytes moved so far: a spin goes on while they grow.
  virtual std::uint64_t bytes_moved() const = 0;
  // About to block: appends the descriptors to wait on. False when something can move already (then the
  // mesh drives again instead of blocking); the part may have appended nothing then.
  virtual bool prepare_to_block(std::vector<pollfd>& fds) = 0;
  // When the poll must wake at the latest, for work of the part's own that no descriptor announces (a
  // connection attempt's retry): set by prepare_to_block().
  virtual Clock::time_point wake_by() const { return Clock::time_point::max(); }
  // The poll() returned: `fds` are the entries this part appended, with their revents.
  virtual void after_poll(std::span<const pollfd> fds) = 0;
  // Shuts every link down so that the peers learn at once that nothing more will come. Any thread.
  virtual void shut_down() = 0;
};

}  // namespace canopy::transport
