// The point-to-point layer every collective runs on: ordered, full-duplex, framed messages between
// the ranks of a group. Implementations: tcp/ (Asio) and, later, verbs/.
//
// Threading: one thread at a time posts and progresses (the communicator serialises its calls);
// abort() may be called from any thread. Nothing here starts a thread of its own for the data path:
// progress() drives the I/O on the calling thread, so a blocking collective pays no hand-off.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "canopy/error.hpp"
#include "common/deadline.hpp"
#include "transport/envelope.hpp"

namespace canopy::transport {

using OpId = std::uint64_t;
class HostCells;

// Where an in-place receive hands its payload (Transport::post_recv_in_place): consume() once per piece,
// in order, from within progress(); a piece's bytes are valid only during the call.
class PieceSink {
 public:
  virtual void consume(std::uint64_t offset, std::span<const std::byte> piece) = 0;

 protected:
  ~PieceSink() = default;
};

// Another engine's I/O that the thread driving a transport keeps moving while it waits: its descriptors join
// the transport's poll(), and it is stepped, never blocking, on every pass. A communicator's one progress
// thread runs an asynchronous collective with its point-to-point engine as the companion, so that messages
// move while the collective waits (collectives/call_sequencer.hpp).
class Companion {
 public:
  // Moves what can move now without blocking. Never throws: the companion's failures are its own.
  virtual void step() = 0;
  // Appends what to wait on. False when something can move already (the poll must not block then).
  virtual bool add_poll_descriptors(std::vector<pollfd>& fds) = 0;
  // The poll() returned: `fds` are the entries add_poll_descriptors() appended, with their revents.
  virtual void after_poll(std::span<const pollfd> fds) = 0;
  // When the poll must end at the latest, for the companion's own deadlines.
  virtual Deadline wake_by() const = 0;

 protected:
  ~Companion() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What carries the bytes: "tcp" or "verbs" (what CANOPY_TRANSPORT=auto resolved to), for reports.
  virtual std::string_view name() const = 0;

  // Queues one message to `peer`. Messages to one peer leave in the order they were posted.
  // `payload` must stay valid until the operation completes. Returns at once.
  virtual OpId post_send(int peer, const Envelope& envelope, std::span<const std::byte> payload) = 0;

  // Queues the receipt of the next message from `peer` into `destination`, which must be exactly
  // the payload's size. Receives from one peer match messages in the order they were posted.
  // The arriving header is checked against `envelope` and the size before a payload byte is written.
  virtual OpId post_recv(int peer, const Envelope& envelope, std::span<std::byte> destination) = 0;

  // Whether messages from `peer` can be received in place: where they arrive in memory this process can
  // read (a shared-memory ring), post_recv_in_place() hands the payload to `sink` piece by piece, straight
  // from there, instead of copying it into a destination (a reduce then reads it where it lies). The
  // header is checked as for post_recv() before the first piece; every piece is a whole number of
  // elements for any element size up to 64 bytes. The sink must not call into the transport.
  virtual bool receives_in_place(int peer) const {
    (void)peer;
    return false;
  }
  virtual OpId post_recv_in_place(int peer, const Envelope& envelope, std::uint64_t bytes, PieceSink& sink);
  // The peers that messages are about to go to or come from (a call's schedule, a probe's ring): a
  // transport that makes its links on first use may learn all their addresses now, in one store request,
  // instead of one as each link is first needed. Makes no connection; a hint only, which never throws.
  virtual void expect_peers(std::span<const int> peers) { (void)peers; }

  // Drives I/O on the calling thread until at least one posted operation has completed (its id is
  // appended to `completed`) or the deadline passes. Returns false when the deadline passed first.
  // Throws Error: PeerFailed (naming the rank) when a peer with pending operations closed, reset or
  // went silent; Mismatch when a header differs from what was expected; Aborted after abort().
  virtual bool progress(Deadline deadline, std::vector<OpId>& completed) = 0;

  // Fails every pending and later operation with Error(Aborted, reason) and wakes progress(). Thread-safe.
  virtual void abort(const std::string& reason) = 0;

  // Waiting on this transport beside other descriptors, in one poll() of another's (a Companion):
  // add_poll_descriptors() appends what progress() would wait on (false: something can move already),
  // after_poll() takes their revents back, and a progress() with an expired deadline then moves what they
  // announced. A transport that cannot be waited on so says so with Error(InvalidArgument).
  virtual bool add_poll_descriptors(std::vector<pollfd>& fds);
  virtual void after_poll(std::span<const pollfd> fds) { (void)fds; }
  // The companion that progress() (and the host cells' waits) keep moving from now on; null for none.
  // Set by the thread that drives the transport, between its calls. A transport that cannot keep one
  // refuses with Error(InvalidArgument).
  virtual void set_companion(Companion* companion);

  // Makes a progress() that is waiting return at once (the next one, if none is waiting), so that a
  // thread driving the transport learns of work another thread handed it. Thread-safe.
  virtual void wake() = 0;

  // An envelope's flags (envelope.hpp) travel with its message. This returns what the messages with a
  // payload that arrived since the last call carried, ORed; messages without payload do not count (their
  // sender may post them before it heard anything). A transport whose messages cannot carry flags says
  // so, and reports none.
  virtual bool carries_flags() const { return false; }
  virtual std::uint8_t take_arrived_flags() { return 0; }

  // Cells every rank of the group maps, where they all share one host (shm/host_cells.hpp): the one-shot
  // collectives run on them. Null where there are none; used by the thread that drives the transport.
  virtual HostCells* host_cells() { return nullptr; }
};

// What progress() throws when the connection to one peer closed, reset or went silent: an
// Error(PeerFailed) that says which peer, so that a caller can tell a peer that left from the others.
class PeerFailedError : public Error {
 public:
  PeerFailedError(int peer, const std::string& message) : Error(ErrorCode::PeerFailed, message), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

// poll() on `fds` and the companion's descriptors (none if null) until one is ready or the deadline (or the
// companion's) passes; hands the companion its revents and steps it, and leaves `fds` as it was given.
// Returns poll()'s result for `fds` alone: how many are ready, or -1 with errno.
int poll_beside(std::vector<pollfd>& fds, Companion* companion, Deadline deadline);

// Blocking conveniences: post, then progress until that one operation is done. Only for callers with
// nothing else in flight on this transport: other operations completing meanwhile are not reported.
void send(Transport& transport, int peer, const Envelope& envelope, std::span<const std::byte> payload,
          Deadline deadline);
void recv(Transport& transport, int peer, const Envelope& envelope, std::span<std::byte> destination,
          Deadline deadline);

}  // namespace canopy::transport
