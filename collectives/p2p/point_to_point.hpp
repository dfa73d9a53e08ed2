// A communicator's point-to-point messages, matched as MPI matches (source, tag): the messages from one
// peer with one tag meet the receives from that peer with that tag in order, whatever other tags and the
// collectives do. A receive from any source meets the first message with its tag to arrive from any
// peer, in posting order with the receives that name that peer. They travel on a transport of their own, in
// an order of their own, so they never take part in the collectives' order. The communicator's one
// progress thread drives them (SideWork, call_sequencer.hpp): in this engine's own poll() between
// asynchronous collectives, and as the companion of the collective's transport while one runs, so they
// move while a collective runs (a pipeline stage's activations beside a gradient all-reduce). The engine is
// a state machine stepped by that thread; it has no thread of its own.
//
// The protocol (p2p_descriptor.hpp) is MPI's eager / rendezvous pair. A message up to the eager limit
// goes at once; if its receive is not posted yet it waits in a buffer at the receiver (an unexpected
// message). A larger one asks first and moves when its receive is posted, straight into the receive's
// buffer: unexpected messages never hold more than the eager limit each. A receive whose size differs
// from its message fails with Error(Mismatch) naming both sides before a byte lands in its buffer.
//
// Failures end the communicator, as a collective's do: a peer that closed while an operation toward it
// was pending (a peer that closes with nothing pending toward it has left, which is no failure), a
// mismatch, an operation past its deadline (with the rank's pending operations in the message), abort().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "canopy/communicator.hpp"
#include "collectives/call_sequencer.hpp"
#include "collectives/p2p/p2p_descriptor.hpp"
#include "transport/transport.hpp"

namespace canopy::collectives {

class PointToPoint final : public SideWork, public transport::Companion {
 public:
  struct Settings {
    std::uint64_t comm_id = 0;
    Duration timeout{0};                              // of every operation
    std::size_t eager_bytes = std::size_t{64} << 10;  // larger messages wait for their receive
  };
  // Called on the progress thread with the error that ended an operation; ends the communicator and
  // returns the error to report (its first failure, which may be another rank's).
  using EndCommunicator = std::function<Error(const Error&)>;

  // `progress`: the communicator's calls, whose progress thread is told of each new operation; the
  // communicator makes this engine its side work (CallSequencer::keep_moving).
  PointToPoint(std::unique_ptr<transport::Transport> transport, Settings settings, EndCommunicator end,
               CallSequencer& progress);
  ~PointToPoint();  // close()
  // Fails what is still pending with Error(Aborted); later operations fail at once. Idempotent. After the
  // progress thread stopped driving this engine (CallSequencer::stop()).
  void close();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  // Thread-safe; the buffer belongs to the operation until its Work completes.
  Work send(std::span<const std::byte> data, int peer, std::uint32_t tag);
  Work recv(std::span<std::byte> data, int peer, std::uint32_t tag);
  // From any peer (MPI_ANY_SOURCE); `source` is written, on the progress thread, before the Work completes.
  Work recv_any(std::span<std::byte> data, int& source, std::uint32_t tag);

  // Fails every pending and later operation with Error(Aborted, reason). Thread-safe.
  void abort(const std::string& reason);

  // SideWork, for the progress thread.
  bool busy() override;
  void progress_once() override;
  void wake() override;
  transport::Companion& companion() override { return *this; }
  // Companion, for the transport of a collective that the progress thread runs.
  void step() override;
  bool add_poll_descriptors(std::vector<pollfd>& fds) override;
  void after_poll(std::span<const pollfd> fds) override;
  Deadline wake_by() const override { return earliest_deadline(); }

 private:
  enum class Direction { Send, Recv };
  using OpIndex = std::uint64_t;
  static constexpr int kAnySource = -1;  // Operation::peer of a receive from any source, until matched

  // One send or receive the caller posted.
  struct Operation {
    Direction direction = Direction::Send;
    int peer = 0;                 // kAnySource: a receive from any source not matched yet
    std::uint32_t tag = 0;
    std::span<std::byte> buffer;  // a send's is read only
    int* source = nullptr;        // a receive from any source: where the sender's rank goes
    std::shared_ptr<Work::State> work;
    Deadline deadline = Deadline::never();
    Clock::time_point posted{};
  };
  // A message whose descriptor came before its receive: an eager one lands in `bytes`.
  struct Arrival {
    P2PDescriptor descriptor;
    std::vector<std::byte> bytes;
    bool landed = false;                // the whole payload is in `bytes`
    std::optional<OpIndex> claimed_by;  // the receive it belongs to, once posted
  };
  // What a transport operation in flight is for.
  struct Pending {
    enum class Kind { DescriptorIn, PayloadIn, DescriptorOut, PayloadOut } kind;
    int peer = 0;
    std::optional<OpIndex> operation;      // the receive a payload lands in; the send a frame ends
    std::optional<std::uint64_t> arrival;  // PayloadIn into an arrival's buffer
    std::uint64_t frame = 0;               // DescriptorOut: its key in Peer::descriptors_out
  };
  struct Peer {
    bool gone = false;      // closed its connection with nothing pending toward it
    bool listened = false;  // a receive for its next descriptor is posted
    std::uint64_t frames_out = 0;
    std::uint64_t frames_in = 0;
    P2PDescriptorBytes descriptor_in{};
    std::map<std::uint64_t, P2PDescriptorBytes> descriptors_out;  // by frame number, alive until sent
    std::uint64_t next_message_id = 0;
    std::map<std::uint32_t, std::deque<OpIndex>> receives;         // posted, unmatched, by tag
    std::map<std::uint32_t, std::deque<std::uint64_t>> unmatched;  // arrivals by tag, in order
    std::map<std::uint64_t, OpIndex> awaiting_data;   // receives whose ClearToSend went out, by id
    std::map<std::uint64_t, OpIndex> awaiting_clear;  // sends whose RequestToSend went out, by id
  };

  Work submit(Operation op);
  // Takes up the operations posted since; the first ever also starts listening to the higher ranks.
  void serve_requests();
  // Drives the transport once, waiting until `deadline` at most, and handles what completed; true when
  // something did (and nothing failed).
  bool drive(Deadline deadline);
  void start_send(OpIndex index);
  void start_recv(OpIndex index);
  void start_recv_any(OpIndex index);
  // The receive for a message with `tag` from `from`, posted first among those naming it and those from
  // any source; taken off its queue, and bound to `from`.
  std::optional<OpIndex> take_receive(int from, std::uint32_t tag);
  // A receive from any source is matched to `peer`'s message: from now on it is a receive from `peer`.
  void bind_source(OpIndex receive, int peer);
  void on_completed(transport::OpId id);
  void on_descriptor(int peer);
  // Throws Error(Mismatch) naming both sides when a receive and its message differ in size.
  void check_sizes(OpIndex receive, const P2PDescriptor& message) const;
  void claim(OpIndex receive, std::uint64_t arrival);
  void expect_descriptor(int peer);
  // Posts the first receive for `peer`'s descriptors, once.
  void listen_to(int peer);
  void expect_payload(int peer, std::span<std::byte> into, Pending pending);
  void post_frame(int peer, const P2PDescriptor& descriptor, std::span<const std::byte> payload,
                  std::optional<OpIndex> completes);
  transport::Envelope frame_envelope(std::uint64_t frame, std::uint64_t bytes, bool payload) const;
  void complete(OpIndex index);
  void peer_left(const transport::PeerFailedError& error);
  // Any failure ends every operation, then the communicator.
  void fail_all(const Error& error);
  void expire_overdue();
  Deadline earliest_deadline() const;
  bool involves(int peer) const;
  std::string describe(const Operation& op) const;
  std::string pending_list() const;

  std::unique_ptr<transport::Transport> transport_;
  const Settings settings_;
  const EndCommunicator end_;
  const int rank_;

  // Touched by the progress thread only.
  std::vector<Peer> peers_;
  std::map<OpIndex, Operation> operations_;
  std::map<std::uint64_t, Arrival> arrivals_;
  std::map<std::uint32_t, std::deque<OpIndex>> any_source_receives_;  // posted, unmatched, by tag
  std::uint64_t next_arrival_ = 0;
  std::unordered_map<transport::OpId, Pending> in_transport_;
  std::vector<transport::OpId> completed_;
  std::optional<Error> failure_;  // set once: every later operation fails with it
  bool listening_ = false;        // to the higher ranks, since the first operation

  CallSequencer& progress_;
  std::mutex mutex_;
  std::atomic<bool> has_requests_{false};  // requests_ is not empty: a step need not take the mutex
  std::deque<OpIndex> requests_;        // under mutex_: posted, not yet accepted
  std::map<OpIndex, Operation> inbox_;  // under mutex_
  OpIndex next_operation_ = 0;          // under mutex_
  bool stopping_ = false;               // under mutex_
  std::optional<Error> ended_;          // under mutex_: the failure that ended the engine
};

}  // namespace canopy::collectives
