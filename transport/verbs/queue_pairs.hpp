// The verbs links' state and the class that drives them: one part of a mesh (io_part.hpp), driven by the
// mesh's progress() like the TCP and shared-memory links and waited for in the same poll() (its completion
// channel and the device's event descriptor). One reliable-connected queue pair per peer routed to it, one
// completion queue (with the completion channel to sleep on) for all of them, one protection domain.
//
// A message moves receiver-driven: post_recv advertises where the payload goes (a clear-to-send
// control message: address, rkey and the frame header the receiver expects); the sender checks that
// header against its own before a byte moves (a difference is a Mismatch on both sides, and nothing is
// written), then RDMA-writes the payload there, the last chunk with an immediate carrying the message
// number, which completes the receive. A send still waiting for its clear-to-send when the mesh
// would sleep is copied aside and announced instead (ready-to-send); the receiver checks the header
// and RDMA-reads the copy, so sends complete without the peer's receive, as they do over TCP.
// Payloads up to a staging slot go through pre-registered staging memory (no registration per
// message); larger ones lease registrations of the user's buffers from the registration cache.
// Control messages and immediates consume receives the peer keeps posted, so both are paid for with
// credits (verbs/credits.hpp). docs/VERBS.md has the whole story.
//
// Its code in three files, as transport/tcp/ splits its own: verbs_mesh.cpp sets the queue pairs up
// through the store and tears them down, verbs_data_path.cpp posts, writes, reads and completes (what the
// mesh drives and waits for), verbs_control.cpp speaks the control protocol (clear-to-send, ready-to-send,
// credits).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "transport/abort_flag.hpp"
#include "transport/io_part.hpp"
#include "transport/transport.hpp"
#include "transport/verbs/credits.hpp"
#include "transport/verbs/device.hpp"
#include "transport/verbs/registration_cache.hpp"
#include "transport/verbs/verbs_transport.hpp"
#include "transport/verbs/wire.hpp"

namespace canopy::transport::verbs {

inline constexpr int kReceiveSlots = 64;      // receives kept posted per peer: the credits a peer starts with
inline constexpr int kControlSendSlots = 16;  // control messages in flight per peer
inline constexpr std::size_t kControlSlotBytes = 128;
inline constexpr int kStagingSlots = 4;  // per peer and direction
inline constexpr std::size_t kStagingSlotBytes = 64 * 1024;
inline constexpr int kMaxSendRequests = 128;  // send queue depth per queue pair
inline constexpr std::size_t kIdleRegistrations = 64;
// How long the mesh polls the completion queue by default before it sleeps (spin_rule.hpp decides when).
inline constexpr std::chrono::microseconds kDefaultVerbsSpin{20};
// Sends copied aside so that they complete before the peer asks for them (see buffer_waiting_sends):
// at most this much memory, kept and reused once allocated.
inline constexpr std::size_t kBufferedSendLimit = std::size_t{256} << 20;
inline constexpr std::size_t kSmallestBufferBlock = 4096;
inline constexpr auto kTeardownLimit = std::chrono::seconds(5);
inline constexpr auto kGracefulSendLimit = std::chrono::seconds(2);
inline constexpr auto kBufferedDeliveryLimit = std::chrono::seconds(10);
static_assert(kControlMessageSize <= kControlSlotBytes);
// A Mismatch with this rkey refuses our ReadyToSend (send numbers); otherwise our ClearToSend.
inline constexpr std::uint32_t kRefusesAnnouncement = 1;

// Work request ids: kind in the top byte, peer in the next three, a slot or message number below.
enum class WrKind : std::uint8_t {
  ControlReceive = 1,
  ControlSend = 2,
  Write = 3,
  WriteLast = 4,
  Read = 5,
  ReadLast = 6
};
inline std::uint64_t make_wr_id(WrKind kind, int peer, std::uint32_t value) {
  return (std::uint64_t{static_cast<std::uint8_t>(kind)} << 56) | (std::uint64_t(peer) << 32) | value;
}
inline WrKind kind_of(std::uint64_t id) {
  return static_cast<WrKind>(id >> 56);
}
inline int peer_of(std::uint64_t id) {
  return static_cast<int>((id >> 32) & 0xffffff);
}
inline std::uint32_t value_of(std::uint64_t id) {
  return static_cast<std::uint32_t>(id);
}

// Memory registered once for the transport's lifetime.
struct RegisteredBlock {
  std::byte* data = nullptr;
  std::size_t bytes = 0;
  ibv_mr* mr = nullptr;
};

// `bytes` of page-aligned memory, touched and registered with `pd` (verbs_mesh.cpp). Throws Error(System)
// naming `what` when allocation or registration fails.
RegisteredBlock register_block(ibv_pd* pd, std::size_t bytes, const char* what,
                               int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

struct PendingRecv {
  OpId id = 0;
  Envelope envelope;
  std::span<std::byte> destination;
  std::uint32_t seq = 0;
  bool advertised = false;
  int staging_slot = -1;                          // small: lands in this slot, copied out on arrival
  std::optional<RegistrationCache::Lease> lease;  // large: written straight into the destination
  // Set when the sender announced a copy of its message to read (ReadyToSend) instead of writing it:
  bool reading = false;
  std::uint64_t remote_address = 0;
  std::uint32_t rkey = 0;
  std::size_t read_posted = 0;  // bytes whose reads are posted
  bool last_read_posted = false;

  std::byte* landing(std::byte* staging) const { return staging_slot >= 0 ? staging : destination.data(); }
};

struct PendingSend {
  OpId id = 0;
  Envelope envelope;
  std::span<const std::byte> payload;
  std::uint32_t seq = 0;
  // Set once its clear-to-send arrived and the writes are queued:
  int staging_slot = -1;
  std::optional<RegistrationCache::Lease> lease;
  std::uint64_t local_address = 0;
  std::uint32_t lkey = 0;
  std::uint64_t remote_address = 0;
  std::uint32_t rkey = 0;
  std::size_t written = 0;  // bytes whose writes are posted
  bool last_posted = false;
  int buffer_block = -1;  // copied into this block of buffered_
  bool reported = false;  // completed for the caller already (buffered), before its writes
};

struct Peer {
  ibv_qp* qp = nullptr;
  std::optional<CreditAccount> credits;
  std::uint32_t next_send_seq = 0;
  std::uint32_t next_recv_seq = 0;
  std::deque<PendingSend> sends;             // waiting for their clear-to-send, in order
  std::deque<PendingSend> writing;           // writes posted or queued, in order
  std::deque<ControlMessage> clear_to_send;  // arrived before the matching post_send
  std::deque<PendingRecv> recvs;             // in order; a prefix is advertised
  std::deque<ControlMessage> outbox;         // control messages waiting for a slot, room or a credit
  std::deque<ControlMessage> ready_to_send;  // announced copies whose receive is not posted yet
  std::deque<PendingSend> lent;              // our copies announced to the peer, until it has read them
  std::vector<bool> control_slot_busy = std::vector<bool>(kControlSendSlots, false);
  std::vector<bool> send_staging_busy = std::vector<bool>(kStagingSlots, false);
  std::vector<bool> recv_staging_busy = std::vector<bool>(kStagingSlots, false);
  int send_requests = 0;     // posted and not yet completed
  int receive_requests = 0;  // posted and not yet completed

  bool has_pending() const { return !sends.empty() || !writing.empty() || !recvs.empty() || !lent.empty(); }
};

inline ControlMessage control(ControlType type, std::uint32_t seq) {
  ControlMessage message;
  message.type = type;
  message.seq = seq;
  return message;
}

inline int free_slot(const std::vector<bool>& busy) {
  auto it = std::find(busy.begin(), busy.end(), false);
  return it == busy.end() ? -1 : static_cast<int>(it - busy.begin());
}

class VerbsLinks final : public IoPart {
 public:
  // Queue pairs with `peers` only (the ranks whose messages the mesh routes here); `abort` is the mesh's.
  VerbsLinks(int rank, int size, std::span<const int> peers, std::unique_ptr<DevicePort> port,
             const VerbsOptions& options, const AbortFlag& abort);
  ~VerbsLinks() override;

  void post_send(OpId id, int peer, const Envelope& envelope, std::span<const std::byte> payload) override;
  void post_recv(OpId id, int peer, const Envelope& envelope, std::span<std::byte> destination) override;
  // The receiver does not see the sender's frame header on the write path.
  bool carries_flags() const override { return false; }
  bool busy() const override { return anything_pending(); }
  void drive(Pass pass, Completions& done) override;
  // Work completions reaped so far: a spin goes on while they come.
  std::uint64_t bytes_moved() const override { return completions_reaped_; }
  bool prepare_to_block(std::vector<pollfd>& fds) override;
  void after_poll(std::span<const pollfd> fds) override;
  // Nothing to close that a peer would notice at once: the mesh's abort flag stops this rank's calls,
  // and the peers learn of it through their own failed work requests or deadlines, as before.
  void shut_down() override {}

  QpAddress local_address(int peer) const;
  void connect(int peer, const QpAddress& remote);
  const DevicePort& port() const { return *port_; }
  // How long the mesh busy-polls the completion queue before it blocks (options.spin, or the spin rule).
  std::chrono::microseconds spin() const { return spin_; }

 private:
  void check_usable(int peer, const char* call);
  [[noreturn]] void fail_transport(ErrorCode code, const std::string& message);
  void rethrow_failure() const;

  // The peer's place among the linked peers: its slots in the control and staging memory.
  std::size_t index_of(int peer) const { return static_cast<std::size_t>(index_of_[peer]); }
  std::byte* control_slot(int peer, int slot, bool receive) const;
  std::byte* staging_slot(int peer, int slot, bool receive) const;
  void post_control_receive(int peer, int slot);

  void pump(int peer);
  void advertise(int peer);
  void start_writes(int peer);
  void post_writes(int peer);
  void flush_outbox(int peer);
  bool post_control(int peer, ControlMessage message);

  int drain_completions(std::vector<OpId>& completed);
  void handle_completion(const ibv_wc& wc, std::vector<OpId>& completed);
  void handle_control(int peer, const ControlMessage& message);
  void handle_arrival(int peer, std::uint32_t seq, std::vector<OpId>& completed);
  void handle_write_done(int peer, std::uint32_t seq, std::vector<OpId>& completed);
  void start_read(int peer, PendingRecv& recv, const ControlMessage& announcement);
  void post_reads(int peer);
  void handle_read_done(int peer, std::uint32_t seq, std::vector<OpId>& completed);
  PendingRecv* find_recv(int peer, std::uint32_t seq);
  void finish_recv(int peer, std::uint32_t seq, std::vector<OpId>& completed);
  void drain_async_events();
  bool anything_pending() const;
  int acquire_buffer_block(std::size_t bytes);
  void buffer_waiting_sends(std::vector<OpId>& completed);
  void teardown();
  void deliver_buffered_sends();

  const int rank_;
  const int size_;
  const std::vector<int> linked_;  // the peers with a queue pair, in rank order
  std::vector<int> index_of_;      // rank -> its place in linked_, -1 for the others
  const VerbsOptions options_;
  const std::chrono::microseconds spin_;  // options_.spin, or what the spin rule chose
  std::unique_ptr<DevicePort> port_;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  unsigned unacked_events_ = 0;
  bool async_event_ready_ = false;  // the device's event descriptor was readable in the last poll()
  RegisteredBlock control_;
  RegisteredBlock staging_;
  struct BufferBlock {
    RegisteredBlock memory;
    bool busy = false;
  };
  std::vector<BufferBlock> buffered_;
  std::size_t buffered_bytes_ = 0;
  std::unique_ptr<RegistrationCache> registrations_;
  std::vector<Peer> peers_;
  std::vector<std::uint32_t> local_psn_;
  std::size_t max_chunk_ = 0;
  int read_depth_ = 1;  // RDMA reads in flight per queue pair, within the device's limits
  // Completed outside drive(): zero-byte announced messages, sends copied aside and completions reaped
  // while preparing to block; drive() reports them.
  std::vector<OpId> early_completions_;
  std::uint64_t completions_reaped_ = 0;

  std::optional<Error> failure_;  // sticky: a queue pair in error cannot be trusted again
  const AbortFlag& abort_;        // the mesh's
};

}  // namespace canopy::transport::verbs
