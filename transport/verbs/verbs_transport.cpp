// The verbs transport. One reliable-connected queue pair per peer, one completion queue (with a
// completion channel to sleep on) for all of them, one protection domain.
//
// A message moves receiver-driven: post_recv advertises where the payload goes (a clear-to-send
// control message: address, rkey and the frame header the receiver expects); the sender checks that
// header against its own before a byte moves (a difference is a Mismatch on both sides, and nothing is
// written), then RDMA-writes the payload there, the last chunk with an immediate carrying the message
// number, which completes the receive. A send still waiting for its clear-to-send when progress()
// would sleep is copied aside and announced instead (ready-to-send); the receiver checks the header
// and RDMA-reads the copy, so sends complete without the peer's receive, as they do over TCP.
// Payloads up to a staging slot go through pre-registered staging memory (no registration per
// message); larger ones lease registrations of the user's buffers from the registration cache.
// Control messages and immediates consume receives the peer keeps posted, so both are paid for with
// credits (verbs/credits.hpp). docs/VERBS.md has the whole story.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/frame.hpp"
#include "transport/verbs/credits.hpp"
#include "transport/verbs/device.hpp"
#include "transport/verbs/registration_cache.hpp"
#include "transport/verbs/wire.hpp"

namespace canopy::transport {
namespace {

using verbs::ControlMessage;
using verbs::ControlType;
using verbs::CreditAccount;
using verbs::DevicePort;
using verbs::QpAddress;
using verbs::RegistrationCache;

constexpr int kReceiveSlots = 64;      // receives kept posted per peer: the credits a peer starts with
constexpr int kControlSendSlots = 16;  // control messages in flight per peer
constexpr std::size_t kControlSlotBytes = 128;
constexpr int kStagingSlots = 4;  // per peer and direction
constexpr std::size_t kStagingSlotBytes = 64 * 1024;
constexpr int kMaxSendRequests = 128;  // send queue depth per queue pair
constexpr std::size_t kIdleRegistrations = 64;
// Sends copied aside so that they complete before the peer asks for them (see buffer_waiting_sends):
// at most this much memory, kept and reused once allocated.
constexpr std::size_t kBufferedSendLimit = std::size_t{256} << 20;
constexpr std::size_t kSmallestBufferBlock = 4096;
constexpr auto kTeardownLimit = std::chrono::seconds(5);
constexpr auto kGracefulSendLimit = std::chrono::seconds(2);
constexpr auto kBufferedDeliveryLimit = std::chrono::seconds(10);
static_assert(verbs::kControlMessageSize <= kControlSlotBytes);
// A Mismatch with this rkey refuses our ReadyToSend (send numbers); otherwise our ClearToSend.
constexpr std::uint32_t kRefusesAnnouncement = 1;

// Work request ids: kind in the top byte, peer in the next three, a slot or message number below.
enum class WrKind : std::uint8_t {
  ControlReceive = 1,
  ControlSend = 2,
  Write = 3,
  WriteLast = 4,
  Read = 5,
  ReadLast = 6
};
std::uint64_t make_wr_id(WrKind kind, int peer, std::uint32_t value) {
  return (std::uint64_t{static_cast<std::uint8_t>(kind)} << 56) | (std::uint64_t(peer) << 32) | value;
}
WrKind kind_of(std::uint64_t id) {
  return static_cast<WrKind>(id >> 56);
}
int peer_of(std::uint64_t id) {
  return static_cast<int>((id >> 32) & 0xffffff);
}
std::uint32_t value_of(std::uint64_t id) {
  return static_cast<std::uint32_t>(id);
}

// Memory registered once for the transport's lifetime.
struct RegisteredBlock {
  std::byte* data = nullptr;
  std::size_t bytes = 0;
  ibv_mr* mr = nullptr;
};

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

ControlMessage control(ControlType type, std::uint32_t seq) {
  ControlMessage message;
  message.type = type;
  message.seq = seq;
  return message;
}

int free_slot(const std::vector<bool>& busy) {
  auto it = std::find(busy.begin(), busy.end(), false);
  return it == busy.end() ? -1 : static_cast<int>(it - busy.begin());
}

class VerbsTransport final : public Transport {
 public:
  VerbsTransport(int rank, int size, std::unique_ptr<DevicePort> port, const VerbsOptions& options);
  ~VerbsTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "verbs"; }
  OpId post_send(int peer, const Envelope& envelope, std::span<const std::byte> payload) override;
  OpId post_recv(int peer, const Envelope& envelope, std::span<std::byte> destination) override;
  bool progress(Deadline deadline, std::vector<OpId>& completed) override;
  void abort(const std::string& reason) override;
  void wake() override;

  QpAddress local_address(int peer) const;
  void connect(int peer, const QpAddress& remote);
  const DevicePort& port() const { return *port_; }

 private:
  void check_usable(int peer, const char* call);
  [[noreturn]] void fail_transport(ErrorCode code, const std::string& message);
  void rethrow_failure() const;

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
  const VerbsOptions options_;
  std::unique_ptr<DevicePort> port_;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  unsigned unacked_events_ = 0;
  int wake_fd_ = -1;  // eventfd: abort() wakes a sleeping progress()
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
  int read_depth_ = 1;                   // RDMA reads in flight per queue pair, within the device's limits
  std::vector<OpId> early_completions_;  // completed outside progress(): zero-byte announced messages
  OpId next_id_ = 1;

  std::optional<Error> failure_;  // sticky: a queue pair in error cannot be trusted again
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;
};

// ---- construction -----------------------------------------------------------------------------

RegisteredBlock register_block(ibv_pd* pd, std::size_t bytes, const char* what,
                               int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) {
  RegisteredBlock block;
  block.bytes = bytes;
  block.data = static_cast<std::byte*>(std::aligned_alloc(4096, bytes));
  if (block.data == nullptr) fail(ErrorCode::System, "verbs: allocating {} bytes for {} failed", bytes, what);
  std::memset(block.data, 0, bytes);  // touch every page now, not on the data path
  block.mr = ibv_reg_mr(pd, block.data, bytes, access);
  if (block.mr == nullptr) {
    int err = errno;
    std::free(block.data);
    fail(ErrorCode::System,
         "verbs: ibv_reg_mr of {} bytes for {} failed: {} (is the locked-memory limit, ulimit -l, too low?)",
         bytes, what, std::strerror(err));
  }
  return block;
}

VerbsTransport::VerbsTransport(int rank, int size, std::unique_ptr<DevicePort> port,
                               const VerbsOptions& options)
    : rank_(rank),
      size_(size),
      options_(options),
      port_(std::move(port)),
      peers_(static_cast<std::size_t>(size)) {
  // Partly built resources are released by teardown(), which copes with any prefix of this.
  try {
    ibv_context* context = port_->context();
    pd_ = ibv_alloc_pd(context);
    if (pd_ == nullptr) fail_errno("verbs: ibv_alloc_pd");
    channel_ = ibv_create_comp_channel(context);
    if (channel_ == nullptr) fail_errno("verbs: ibv_create_comp_channel");
    int cq_entries = std::max(1, size - 1) * (kReceiveSlots + kMaxSendRequests) + 16;
    cq_ = ibv_create_cq(context, cq_entries, nullptr, channel_, 0);
    if (cq_ == nullptr) fail_errno(fmt::format("verbs: ibv_create_cq of {} entries", cq_entries));
    for (int fd : {channel_->fd, context->async_fd})
      if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) fail_errno("verbs: fcntl O_NONBLOCK");
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) fail_errno("verbs: eventfd");

    const auto n = static_cast<std::size_t>(size);
    control_ =
        register_block(pd_, n * (kReceiveSlots + kControlSendSlots) * kControlSlotBytes, "control messages");
    staging_ = register_block(pd_, n * 2 * kStagingSlots * kStagingSlotBytes, "staging");
    registrations_ = std::make_unique<RegistrationCache>(
        [pd = pd_](std::uintptr_t begin, std::size_t length, bool writable) {
          int access = writable ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0;
          ibv_mr* mr = ibv_reg_mr(pd, reinterpret_cast<void*>(begin), length, access);
          if (mr == nullptr)
            fail(ErrorCode::System,
                 "verbs: ibv_reg_mr of a {}-byte user buffer failed: {} (ulimit -l too low?)", length,
                 std::strerror(errno));
          return verbs::Registration{mr, mr->lkey, mr->rkey};
        },
        [](const verbs::Registration& r) { ibv_dereg_mr(static_cast<ibv_mr*>(r.handle)); },
        options.keep_registrations, kIdleRegistrations);

    ibv_device_attr device{};
    if (ibv_query_device(context, &device) == 0)
      read_depth_ = std::clamp(std::min(device.max_qp_rd_atom, device.max_qp_init_rd_atom), 1, 16);
    std::size_t port_max = port_->attributes().max_msg_sz;
    max_chunk_ = options.max_chunk_bytes != 0 ? std::min(options.max_chunk_bytes, port_max) : port_max;
    if (max_chunk_ == 0) max_chunk_ = std::size_t{1} << 30;

    std::random_device random;
    local_psn_.resize(n);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      Peer& p = peers_[peer];
      ibv_qp_init_attr init{};
      init.send_cq = cq_;
      init.recv_cq = cq_;
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = kMaxSendRequests;
      init.cap.max_recv_wr = kReceiveSlots;
      init.cap.max_send_sge = 1;
      init.cap.max_recv_sge = 1;
      p.qp = ibv_create_qp(pd_, &init);
      if (p.qp == nullptr) fail_errno(fmt::format("verbs: ibv_create_qp for rank {}", peer));
      ibv_qp_attr attr{};
      attr.qp_state = IBV_QPS_INIT;
      attr.pkey_index = 0;
      attr.port_num = static_cast<std::uint8_t>(port_->port());
      attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
      if (int err = ibv_modify_qp(p.qp, &attr,
                                  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        fail_errno(fmt::format("verbs: queue pair for rank {} to INIT", peer), err);
      p.credits.emplace(kReceiveSlots);
      local_psn_[peer] = random() & 0xffffff;
      for (int slot = 0; slot < kReceiveSlots; ++slot) post_control_receive(peer, slot);
    }
  } catch (...) {
    teardown();
    throw;
  }
}

VerbsTransport::~VerbsTransport() {
  teardown();
}

QpAddress VerbsTransport::local_address(int peer) const {
  QpAddress a;
  a.lid = port_->attributes().lid;
  a.qp_number = peers_[peer].qp->qp_num;
  a.packet_sequence = local_psn_[peer];
  a.port = static_cast<std::uint8_t>(port_->port());
  a.mtu = static_cast<std::uint8_t>(port_->attributes().active_mtu);
  a.ethernet = port_->ethernet();
  a.gid_index = static_cast<std::uint8_t>(port_->gid().index);
  a.gid = port_->gid().gid;
  a.receive_slots = kReceiveSlots;
  return a;
}

// INIT -> RTR (ready to receive from `remote`) -> RTS (ready to send).
void VerbsTransport::connect(int peer, const QpAddress& remote) {
  if (remote.ethernet != port_->ethernet())
    fail(ErrorCode::Config, "rank {}: rank {} uses {} but this rank {}: both must be on the same fabric",
         rank_, peer, remote.ethernet ? "RoCE" : "InfiniBand", port_->ethernet() ? "RoCE" : "InfiniBand");
  ibv_qp* qp = peers_[peer].qp;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(remote.mtu, port_->attributes().active_mtu));
  attr.dest_qp_num = remote.qp_number;
  attr.rq_psn = remote.packet_sequence;
  attr.max_dest_rd_atomic = static_cast<std::uint8_t>(read_depth_);
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = static_cast<std::uint8_t>(port_->port());
  attr.ah_attr.dlid = remote.lid;
  if (remote.ethernet) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(port_->gid().index);
    attr.ah_attr.grh.hop_limit = 64;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int err = ibv_modify_qp(qp, &attr, mask))
    fail_errno(fmt::format("verbs: rank {}: queue pair for rank {} to RTR", rank_, peer), err);
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;  // credits make RNR impossible; retry rather than fail if a provider disagrees
  attr.sq_psn = local_psn_[peer];
  attr.max_rd_atomic = static_cast<std::uint8_t>(read_depth_);
  mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
         IBV_QP_MAX_QP_RD_ATOMIC;
  if (int err = ibv_modify_qp(qp, &attr, mask))
    fail_errno(fmt::format("verbs: rank {}: queue pair for rank {} to RTS", rank_, peer), err);
  if (remote.receive_slots != kReceiveSlots)
    peers_[peer].credits.emplace(static_cast<int>(remote.receive_slots));
}

// ---- teardown ---------------------------------------------------------------------------------

// Memory may only be deregistered once the device can no longer touch it: move every queue pair to
// ERR (flushing what is posted), reap every completion, then free. If the completions do not all come
// back in time, the memory is leaked rather than freed under a live DMA.
// Sends already reported complete (buffered) still owe the peer their bytes, as a closed TCP socket
// still delivers what the kernel took: keep serving clear-to-sends until they are written, within a
// bound, and say so if they could not be.
void VerbsTransport::deliver_buffered_sends() {
  auto owed = [&] {
    int n = 0;
    for (const Peer& p : peers_) n += static_cast<int>(p.lent.size());
    return n;
  };
  Deadline limit = Deadline::after(kBufferedDeliveryLimit);
  std::vector<OpId> ignored;
  try {
    while (owed() > 0 && !limit.expired()) {
      if (drain_completions(ignored) == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
      for (int peer = 0; peer < size_; ++peer)
        if (peer != rank_) pump(peer);
      ignored.clear();
    }
  } catch (const Error& e) {
    log::warn("rank {}: verbs teardown: {}", rank_, e.what());
  }
  if (owed() > 0)
    log::warn("rank {}: verbs teardown: {} completed send(s) were never read by their receiver within {} s",
              rank_, owed(),
              std::chrono::duration_cast<std::chrono::seconds>(kBufferedDeliveryLimit).count());
}

void VerbsTransport::teardown() {
  bool reaped = true;
  if (cq_ != nullptr && !failure_ && !aborted_.load()) deliver_buffered_sends();
  if (cq_ != nullptr) {
    // Let what is already on the wire finish first (a Mismatch refusal, the last credit update), so
    // that the peer hears it instead of a flush; a dead peer bounds this by the retry timeout.
    Deadline graceful = Deadline::after(kGracefulSendLimit);
    auto sends_outstanding = [&] {
      int n = 0;
      for (const Peer& p : peers_) n += p.send_requests;
      return n;
    };
    ibv_wc batch[32];
    while (sends_outstanding() > 0 && !graceful.expired()) {
      int n = ibv_poll_cq(cq_, 32, batch);
      if (n < 0) break;
      for (int i = 0; i < n; ++i) {
        Peer& p = peers_[peer_of(batch[i].wr_id)];
        (kind_of(batch[i].wr_id) == WrKind::ControlReceive ? p.receive_requests : p.send_requests) -= 1;
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (Peer& p : peers_) {
      if (p.qp == nullptr) continue;
      ibv_qp_attr attr{};
      attr.qp_state = IBV_QPS_ERR;
      ibv_modify_qp(p.qp, &attr, IBV_QP_STATE);
    }
    auto outstanding = [&] {
      int n = 0;
      for (const Peer& p : peers_) n += p.send_requests + p.receive_requests;
      return n;
    };
    Deadline limit = Deadline::after(kTeardownLimit);
    ibv_wc wcs[32];
    while (outstanding() > 0 && !limit.expired()) {
      int n = ibv_poll_cq(cq_, 32, wcs);
      if (n < 0) break;
      for (int i = 0; i < n; ++i) {
        Peer& p = peers_[peer_of(wcs[i].wr_id)];
        (kind_of(wcs[i].wr_id) == WrKind::ControlReceive ? p.receive_requests : p.send_requests) -= 1;
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    reaped = outstanding() == 0;
    if (!reaped)
      log::warn(
          "rank {}: verbs teardown: {} work requests never completed; leaking their memory rather than "
          "freeing it under the device",
          rank_, outstanding());
  }
  for (Peer& p : peers_) {
    if (p.qp != nullptr && reaped) ibv_destroy_qp(p.qp);
    p.qp = nullptr;
  }
  if (reaped) {
    registrations_.reset();
    for (BufferBlock& block : buffered_) {
      ibv_dereg_mr(block.memory.mr);
      std::free(block.memory.data);
    }
    buffered_.clear();
    for (RegisteredBlock* block : {&control_, &staging_}) {
      if (block->mr != nullptr) ibv_dereg_mr(block->mr);
      std::free(block->data);
      *block = {};
    }
  } else {
    registrations_.release();  // deliberately leaked with its registrations
  }
  if (cq_ != nullptr && reaped) {
    if (unacked_events_ > 0) ibv_ack_cq_events(cq_, unacked_events_);
    ibv_destroy_cq(cq_);
  }
  cq_ = nullptr;
  if (channel_ != nullptr && reaped) ibv_destroy_comp_channel(channel_);
  channel_ = nullptr;
  if (pd_ != nullptr && reaped) ibv_dealloc_pd(pd_);
  pd_ = nullptr;
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
  if (!reaped) (void)port_.release();  // the context owns what was leaked
}

// ---- errors -----------------------------------------------------------------------------------

void VerbsTransport::fail_transport(ErrorCode code, const std::string& message) {
  if (!failure_) failure_.emplace(code, message);
  throw *failure_;
}

void VerbsTransport::rethrow_failure() const {
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard lock(abort_mutex_);
    fail(ErrorCode::Aborted, "rank {}: transport aborted: {}", rank_, abort_reason_);
  }
  if (failure_) throw *failure_;
}

void VerbsTransport::check_usable(int peer, const char* call) {
  rethrow_failure();
  if (peer < 0 || peer >= size_)
    fail(ErrorCode::InvalidArgument, "rank {}: {} to/from rank {}, but the group has ranks 0..{}", rank_,
         call, peer, size_ - 1);
  if (peer == rank_)
    fail(ErrorCode::InvalidArgument, "rank {}: {} with itself: a schedule must copy locally instead", rank_,
         call);
}

void VerbsTransport::abort(const std::string& reason) {
  {
    std::lock_guard lock(abort_mutex_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    abort_reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof(one));
}

void VerbsTransport::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof(one));
}

// ---- memory -----------------------------------------------------------------------------------

std::byte* VerbsTransport::control_slot(int peer, int slot, bool receive) const {
  std::size_t index = static_cast<std::size_t>(peer) * (kReceiveSlots + kControlSendSlots) +
                      static_cast<std::size_t>(receive ? slot : kReceiveSlots + slot);
  return control_.data + index * kControlSlotBytes;
}

std::byte* VerbsTransport::staging_slot(int peer, int slot, bool receive) const {
  std::size_t index = static_cast<std::size_t>(peer) * 2 * kStagingSlots +
                      static_cast<std::size_t>((receive ? kStagingSlots : 0) + slot);
  return staging_.data + index * kStagingSlotBytes;
}

void VerbsTransport::post_control_receive(int peer, int slot) {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(control_slot(peer, slot, true)), kControlSlotBytes,
              control_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = make_wr_id(WrKind::ControlReceive, peer, static_cast<std::uint32_t>(slot));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int err = ibv_post_recv(peers_[peer].qp, &wr, &bad))
    fail_transport(ErrorCode::System,
                   fmt::format("rank {}: ibv_post_recv for rank {}: {}", rank_, peer, std::strerror(err)));
  ++peers_[peer].receive_requests;
}

// ---- posting ----------------------------------------------------------------------------------

OpId VerbsTransport::post_send(int peer, const Envelope& envelope, std::span<const std::byte> payload) {
  check_usable(peer, "post_send");
  Peer& p = peers_[peer];
  PendingSend send;
  send.id = next_id_++;
  send.envelope = envelope;
  send.payload = payload;
  send.seq = p.next_send_seq++;
  p.sends.push_back(send);
  pump(peer);
  return send.id;
}

OpId VerbsTransport::post_recv(int peer, const Envelope& envelope, std::span<std::byte> destination) {
  check_usable(peer, "post_recv");
  Peer& p = peers_[peer];
  PendingRecv recv;
  recv.id = next_id_++;
  recv.envelope = envelope;
  recv.destination = destination;
  recv.seq = p.next_recv_seq++;
  p.recvs.push_back(recv);
  pump(peer);
  return recv.id;
}

// Moves everything forward that resources allow, in an order that keeps each stream FIFO.
void VerbsTransport::pump(int peer) {
  advertise(peer);
  flush_outbox(peer);
  start_writes(peer);
  post_writes(peer);
  post_reads(peer);
  Peer& p = peers_[peer];
  // Credits owed that no control message carried (none to send, or none affordable: the peer may be
  // waiting for exactly these to afford its own): a credit update of its own, paid from the reserve.
  if (p.credits->update_due() && p.credits->can_send_update())
    post_control(peer, control(ControlType::Credit, 0));
}

// Receives are advertised in order; each needs a staging slot (small) or a registration (large).
void VerbsTransport::advertise(int peer) {
  Peer& p = peers_[peer];
  for (PendingRecv& recv : p.recvs) {
    if (recv.advertised) continue;
    ControlMessage cts = control(ControlType::ClearToSend, recv.seq);
    cts.frame = FrameHeader{.envelope = recv.envelope, .payload_bytes = recv.destination.size()};
    if (recv.destination.empty()) {
      // Nothing to write: the sender completes it with a zero-byte send with immediate.
    } else if (recv.destination.size() <= kStagingSlotBytes) {
      int slot = free_slot(p.recv_staging_busy);
      if (slot < 0) return;  // later receives wait too: they must be advertised in order
      p.recv_staging_busy[slot] = true;
      recv.staging_slot = slot;
      cts.address = reinterpret_cast<std::uint64_t>(staging_slot(peer, slot, true));
      cts.rkey = staging_.mr->rkey;
    } else {
      recv.lease = registrations_->acquire(recv.destination.data(), recv.destination.size(), true);
      cts.address = reinterpret_cast<std::uint64_t>(recv.destination.data());
      cts.rkey = recv.lease->rkey;
    }
    recv.advertised = true;
    if (!p.ready_to_send.empty() && p.ready_to_send.front().seq == recv.seq) {
      // The sender already announced a copy: read it instead of asking for a write.
      ControlMessage announcement = p.ready_to_send.front();
      p.ready_to_send.pop_front();
      start_read(peer, recv, announcement);
    } else {
      p.outbox.push_back(cts);
    }
  }
}

void VerbsTransport::flush_outbox(int peer) {
  Peer& p = peers_[peer];
  while (!p.outbox.empty() && p.credits->can_send_message()) {
    if (!post_control(peer, p.outbox.front())) return;
    p.outbox.pop_front();
  }
}

// Posts one control message if a slot, send-queue room and a credit allow; false otherwise.
bool VerbsTransport::post_control(int peer, ControlMessage message) {
  Peer& p = peers_[peer];
  int slot = free_slot(p.control_slot_busy);
  if (slot < 0 || p.send_requests >= kMaxSendRequests) return false;
  message.credits = static_cast<std::uint16_t>(p.credits->take_owed());
  std::byte* buffer = control_slot(peer, slot, false);
  verbs::encode_control(message,
                        std::span<std::byte, verbs::kControlMessageSize>(buffer, verbs::kControlMessageSize));
  ibv_sge sge{reinterpret_cast<std::uint64_t>(buffer), static_cast<std::uint32_t>(verbs::kControlMessageSize),
              control_.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(WrKind::ControlSend, peer, static_cast<std::uint32_t>(slot));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(p.qp, &wr, &bad))
    fail_transport(ErrorCode::System,
                   fmt::format("rank {}: ibv_post_send of a control message to rank {}: {}", rank_, peer,
                               std::strerror(err)));
  p.control_slot_busy[slot] = true;
  ++p.send_requests;
  p.credits->spend();
  return true;
}

// Pairs posted sends with arrived clear-to-sends, in order, after checking they describe one message.
void VerbsTransport::start_writes(int peer) {
  Peer& p = peers_[peer];
  while (!p.sends.empty() && !p.clear_to_send.empty()) {
    PendingSend& send = p.sends.front();
    const ControlMessage& cts = p.clear_to_send.front();
    if (cts.seq != send.seq)
      fail_transport(ErrorCode::Protocol,
                     fmt::format("rank {}: rank {} sent clear-to-send #{} while message #{} was next", rank_,
                                 peer, cts.seq, send.seq));
    FrameHeader mine{.envelope = send.envelope, .payload_bytes = send.payload.size()};
    try {
      check_frame(mine, cts.frame.envelope, cts.frame.payload_bytes, peer, rank_);
    } catch (const Error& e) {
      ControlMessage refusal = control(ControlType::Mismatch, send.seq);
      refusal.frame = mine;
      if (p.credits->can_send_update())
        post_control(peer, refusal);  // best effort: the peer times out otherwise
      fail_transport(e.code(), e.what());
    }
    if (!send.payload.empty() && send.buffer_block < 0) {
      if (send.payload.size() <= kStagingSlotBytes) {
        int slot = free_slot(p.send_staging_busy);
        if (slot < 0) return;
        p.send_staging_busy[slot] = true;
        send.staging_slot = slot;
        std::byte* staging = staging_slot(peer, slot, false);
        std::memcpy(staging, send.payload.data(), send.payload.size());
        send.local_address = reinterpret_cast<std::uint64_t>(staging);
        send.lkey = staging_.mr->lkey;
      } else {
        send.lease = registrations_->acquire(send.payload.data(), send.payload.size(), false);
        send.local_address = reinterpret_cast<std::uint64_t>(send.payload.data());
        send.lkey = send.lease->lkey;
      }
    }
    send.remote_address = cts.address;
    send.rkey = cts.rkey;
    p.writing.push_back(send);
    p.sends.pop_front();
    p.clear_to_send.pop_front();
  }
}

// Posts queued writes as send-queue room allows; the last chunk of each message carries the
// immediate and costs a credit.
void VerbsTransport::post_writes(int peer) {
  Peer& p = peers_[peer];
  for (PendingSend& send : p.writing) {
    while (!send.last_posted) {
      if (p.send_requests >= kMaxSendRequests) return;
      const std::size_t total = send.payload.size();
      const std::size_t chunk = std::min(max_chunk_, total - send.written);
      const bool last = send.written + chunk == total;
      if (last && !p.credits->can_send_message()) return;
      ibv_sge sge{send.local_address + send.written, static_cast<std::uint32_t>(chunk), send.lkey};
      ibv_send_wr wr{};
      wr.wr_id = make_wr_id(last ? WrKind::WriteLast : WrKind::Write, peer, send.seq);
      wr.sg_list = chunk > 0 ? &sge : nullptr;
      wr.num_sge = chunk > 0 ? 1 : 0;
      wr.send_flags = IBV_SEND_SIGNALED;
      if (total == 0) {
        wr.opcode = IBV_WR_SEND_WITH_IMM;  // a zero-byte write needs no rkey, but not every provider agrees
      } else {
        wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = send.remote_address + send.written;
        wr.wr.rdma.rkey = send.rkey;
      }
      if (last) wr.imm_data = htonl(send.seq);
      ibv_send_wr* bad = nullptr;
      if (int err = ibv_post_send(p.qp, &wr, &bad))
        fail_transport(ErrorCode::System,
                       fmt::format("rank {}: ibv_post_send of an RDMA write to rank {}: {}", rank_, peer,
                                   std::strerror(err)));
      ++p.send_requests;
      send.written += chunk;
      if (last) {
        p.credits->spend();
        send.last_posted = true;
      }
    }
  }
}

// ---- completions ------------------------------------------------------------------------------

int VerbsTransport::drain_completions(std::vector<OpId>& completed) {
  ibv_wc wcs[32];
  int total = 0;
  for (;;) {
    int n = ibv_poll_cq(cq_, 32, wcs);
    if (n < 0) fail_transport(ErrorCode::System, fmt::format("rank {}: ibv_poll_cq failed", rank_));
    // Account for the whole batch first: if handling one throws, teardown must still know what is reaped.
    for (int i = 0; i < n; ++i) {
      Peer& p = peers_[peer_of(wcs[i].wr_id)];
      (kind_of(wcs[i].wr_id) == WrKind::ControlReceive ? p.receive_requests : p.send_requests) -= 1;
    }
    for (int i = 0; i < n; ++i) handle_completion(wcs[i], completed);
    total += n;
    if (n < 32) return total;
  }
}

const char* opcode_name(WrKind kind) {
  switch (kind) {
    case WrKind::ControlReceive:
      return "receive";
    case WrKind::ControlSend:
      return "control send";
    case WrKind::Read:
    case WrKind::ReadLast:
      return "RDMA read";
    default:
      return "RDMA write";
  }
}

void VerbsTransport::handle_completion(const ibv_wc& wc, std::vector<OpId>& completed) {
  const WrKind kind = kind_of(wc.wr_id);
  const int peer = peer_of(wc.wr_id);
  Peer& p = peers_[peer];
  if (wc.status != IBV_WC_SUCCESS) {
    if (failure_) return;  // the flush of everything after the first error
    fail_transport(
        ErrorCode::PeerFailed,
        fmt::format("rank {}: {} with rank {} failed: {} (vendor error 0x{:x}); rank {} may have exited, "
                    "or its queue pair was destroyed",
                    rank_, opcode_name(kind), peer, ibv_wc_status_str(wc.status), wc.vendor_err, peer));
  }
  switch (kind) {
    case WrKind::ControlReceive: {
      const int slot = static_cast<int>(value_of(wc.wr_id));
      if (wc.wc_flags & IBV_WC_WITH_IMM) {
        handle_arrival(peer, ntohl(wc.imm_data), completed);
      } else {
        auto message =
            verbs::decode_control(std::span<const std::byte>(control_slot(peer, slot, true), wc.byte_len));
        handle_control(peer, message);
      }
      post_control_receive(peer, slot);
      p.credits->reposted();
      break;
    }
    case WrKind::ControlSend:
      p.control_slot_busy[value_of(wc.wr_id)] = false;
      break;
    case WrKind::Write:
      break;
    case WrKind::WriteLast:
      handle_write_done(peer, value_of(wc.wr_id), completed);
      break;
    case WrKind::Read:
      break;
    case WrKind::ReadLast:
      handle_read_done(peer, value_of(wc.wr_id), completed);
      break;
  }
}

void VerbsTransport::handle_control(int peer, const ControlMessage& message) {
  Peer& p = peers_[peer];
  p.credits->grant(message.credits);
  switch (message.type) {
    case ControlType::ClearToSend:
      // Crossed with our ReadyToSend for the same message: the peer reads it, nothing to write.
      if (std::any_of(p.lent.begin(), p.lent.end(),
                      [&](const PendingSend& s) { return s.seq == message.seq; }))
        break;
      p.clear_to_send.push_back(message);
      break;
    case ControlType::ReadyToSend:
      if (PendingRecv* recv = find_recv(peer, message.seq); recv != nullptr && recv->advertised) {
        start_read(peer, *recv, message);
      } else {
        p.ready_to_send.push_back(message);  // advertise() takes it when the receive is posted
      }
      break;
    case ControlType::ReadDone: {
      auto it = std::find_if(p.lent.begin(), p.lent.end(),
                             [&](const PendingSend& s) { return s.seq == message.seq; });
      if (it == p.lent.end())
        fail_transport(ErrorCode::Protocol,
                       fmt::format("rank {}: rank {} read message #{}, which was never announced", rank_,
                                   peer, message.seq));
      if (it->buffer_block >= 0) buffered_[static_cast<std::size_t>(it->buffer_block)].busy = false;
      p.lent.erase(it);
      break;
    }
    case ControlType::Mismatch: {
      // The other side refused what we announced or advertised: report the same difference here.
      // Send and receive numbers are separate sequences: rkey says which one the refusal is about.
      auto lent = std::find_if(p.lent.begin(), p.lent.end(),
                               [&](const PendingSend& s) { return s.seq == message.seq; });
      if (message.rkey == kRefusesAnnouncement) {
        if (lent == p.lent.end())
          fail_transport(ErrorCode::Protocol,
                         fmt::format("rank {}: rank {} refused message #{}, which was never announced", rank_,
                                     peer, message.seq));
        FrameHeader mine{.envelope = lent->envelope, .payload_bytes = lent->payload.size()};
        try {
          check_frame(mine, message.frame.envelope, message.frame.payload_bytes, peer, rank_);
        } catch (const Error& e) {
          fail_transport(e.code(), e.what());
        }
      }
      const PendingRecv* found = find_recv(peer, message.seq);
      if (found == nullptr)
        fail_transport(ErrorCode::Protocol,
                       fmt::format("rank {}: rank {} refused message #{} that was not expected", rank_, peer,
                                   message.seq));
      const PendingRecv& recv = *found;
      try {
        check_frame(message.frame, recv.envelope, recv.destination.size(), rank_, peer);
      } catch (const Error& e) {
        fail_transport(e.code(), e.what());
      }
      fail_transport(ErrorCode::Protocol,
                     fmt::format("rank {}: rank {} refused message #{} although the headers agree", rank_,
                                 peer, message.seq));
    }
    case ControlType::Credit:
      break;
  }
}

PendingRecv* VerbsTransport::find_recv(int peer, std::uint32_t seq) {
  for (PendingRecv& recv : peers_[peer].recvs)
    if (recv.seq == seq) return &recv;
  return nullptr;
}

// The payload of receive #seq is in place (written, or read): copy it out of staging, release what it
// held, report it. Receives complete by number, not in posting order: a read may finish after the
// write of a later message.
void VerbsTransport::finish_recv(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
  Peer& p = peers_[peer];
  auto it = std::find_if(p.recvs.begin(), p.recvs.end(), [&](const PendingRecv& r) { return r.seq == seq; });
  if (it == p.recvs.end() || !it->advertised)
    fail_transport(
        ErrorCode::Protocol,
        fmt::format("rank {}: rank {} completed message #{}, which was not advertised", rank_, peer, seq));
  PendingRecv& recv = *it;
  if (recv.staging_slot >= 0) {
    std::memcpy(recv.destination.data(), staging_slot(peer, recv.staging_slot, true),
                recv.destination.size());
    p.recv_staging_busy[recv.staging_slot] = false;
  }
  if (recv.lease) registrations_->release(*recv.lease);
  completed.push_back(recv.id);
  p.recvs.erase(it);
}

void VerbsTransport::handle_arrival(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
  finish_recv(peer, seq, completed);
}

// The sender announced a copy of message #seq: check its header against this receive before a byte
// moves, then read it into the place this receive would have advertised.
void VerbsTransport::start_read(int peer, PendingRecv& recv, const ControlMessage& announcement) {
  Peer& p = peers_[peer];
  try {
    check_frame(announcement.frame, recv.envelope, recv.destination.size(), rank_, peer);
  } catch (const Error& e) {
    ControlMessage refusal = control(ControlType::Mismatch, recv.seq);
    refusal.frame = FrameHeader{.envelope = recv.envelope, .payload_bytes = recv.destination.size()};
    refusal.rkey = kRefusesAnnouncement;
    if (p.credits->can_send_update()) post_control(peer, refusal);  // best effort
    fail_transport(e.code(), e.what());
  }
  recv.reading = true;
  recv.remote_address = announcement.address;
  recv.rkey = announcement.rkey;
  if (recv.destination.empty()) {
    recv.last_read_posted = true;
    finish_recv(peer, recv.seq, early_completions_);
    p.outbox.push_back(control(ControlType::ReadDone, announcement.seq));
  }
}

// Posts queued reads as send-queue room allows (reads need no credit: they consume no receive).
void VerbsTransport::post_reads(int peer) {
  Peer& p = peers_[peer];
  for (PendingRecv& recv : p.recvs) {
    if (!recv.reading) continue;
    while (!recv.last_read_posted) {
      if (p.send_requests >= kMaxSendRequests) return;
      const std::size_t total = recv.destination.size();
      const std::size_t chunk = std::min(max_chunk_, total - recv.read_posted);
      const bool last = recv.read_posted + chunk == total;
      std::byte* local =
          recv.landing(recv.staging_slot >= 0 ? staging_slot(peer, recv.staging_slot, true) : nullptr);
      const std::uint32_t lkey = recv.staging_slot >= 0 ? staging_.mr->lkey : recv.lease->lkey;
      ibv_sge sge{reinterpret_cast<std::uint64_t>(local) + recv.read_posted,
                  static_cast<std::uint32_t>(chunk), lkey};
      ibv_send_wr wr{};
      wr.wr_id = make_wr_id(last ? WrKind::ReadLast : WrKind::Read, peer, recv.seq);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_READ;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = recv.remote_address + recv.read_posted;
      wr.wr.rdma.rkey = recv.rkey;
      ibv_send_wr* bad = nullptr;
      if (int err = ibv_post_send(p.qp, &wr, &bad))
        fail_transport(ErrorCode::System,
                       fmt::format("rank {}: ibv_post_send of an RDMA read from rank {}: {}", rank_, peer,
                                   std::strerror(err)));
      ++p.send_requests;
      recv.read_posted += chunk;
      recv.last_read_posted = last;
    }
  }
}

void VerbsTransport::handle_read_done(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
  finish_recv(peer, seq, completed);
  peers_[peer].outbox.push_back(control(ControlType::ReadDone, seq));
}

void VerbsTransport::handle_write_done(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
  Peer& p = peers_[peer];
  if (p.writing.empty() || p.writing.front().seq != seq)
    fail_transport(ErrorCode::Protocol,
                   fmt::format("rank {}: write #{} to rank {} completed out of order", rank_, seq, peer));
  PendingSend& send = p.writing.front();
  if (send.staging_slot >= 0) p.send_staging_busy[send.staging_slot] = false;
  if (send.lease) registrations_->release(*send.lease);
  if (send.buffer_block >= 0) buffered_[static_cast<std::size_t>(send.buffer_block)].busy = false;
  if (!send.reported) completed.push_back(send.id);
  p.writing.pop_front();
}

void VerbsTransport::drain_async_events() {
  ibv_async_event event{};
  while (ibv_get_async_event(port_->context(), &event) == 0) {
    const ibv_event_type type = event.event_type;
    int peer = -1;
    if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR || type == IBV_EVENT_QP_ACCESS_ERR) {
      for (int r = 0; r < size_; ++r)
        if (peers_[r].qp == event.element.qp) peer = r;
    }
    ibv_ack_async_event(&event);
    switch (type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        fail_transport(ErrorCode::PeerFailed, fmt::format("rank {}: the queue pair to rank {} failed: {}",
                                                          rank_, peer, ibv_event_type_str(type)));
      case IBV_EVENT_CQ_ERR:
      case IBV_EVENT_DEVICE_FATAL:
      case IBV_EVENT_PORT_ERR:
        fail_transport(ErrorCode::System, fmt::format("rank {}: RDMA device {}: {}", rank_, port_->device(),
                                                      ibv_event_type_str(type)));
      default:
        log::debug("rank {}: verbs async event: {}", rank_, ibv_event_type_str(type));
    }
  }
}

bool VerbsTransport::anything_pending() const {
  return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.has_pending(); });
}

// A free registered block of at least `bytes`, allocating one (a power of two) within the limit;
// -1 when the limit is reached.
int VerbsTransport::acquire_buffer_block(std::size_t bytes) {
  int best = -1;
  for (std::size_t i = 0; i < buffered_.size(); ++i) {
    const BufferBlock& block = buffered_[i];
    if (!block.busy && block.memory.bytes >= bytes &&
        (best < 0 || block.memory.bytes < buffered_[static_cast<std::size_t>(best)].memory.bytes))
      best = static_cast<int>(i);
  }
  if (best < 0) {
    std::size_t size = kSmallestBufferBlock;
    while (size < bytes) size *= 2;
    if (buffered_bytes_ + size > kBufferedSendLimit) return -1;
    buffered_.push_back(BufferBlock{
        register_block(pd_, size, "buffered sends", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), false});
    buffered_bytes_ += size;
    best = static_cast<int>(buffered_.size() - 1);
  }
  buffered_[static_cast<std::size_t>(best)].busy = true;
  return best;
}

// Sends still waiting for their clear-to-send when progress() is about to sleep: copy each aside,
// announce the copy (ReadyToSend: address, rkey, frame header) and report the send complete. The
// receiver reads the copy when its receive is posted, with no help from this rank's CPU, so this rank
// may go off and do anything (even exit: teardown waits for the reads). In order per peer, and only
// while the announcement can be posted at once, so that what is reported complete is on its way.
void VerbsTransport::buffer_waiting_sends(std::vector<OpId>& completed) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    Peer& p = peers_[peer];
    while (!p.sends.empty() && p.clear_to_send.empty() && p.outbox.empty() && p.credits->can_send_message()) {
      PendingSend& send = p.sends.front();
      int block = -1;
      if (!send.payload.empty()) {
        block = acquire_buffer_block(send.payload.size());
        if (block < 0) break;  // over the limit: the rest wait for their clear-to-send
      }
      ControlMessage announcement = control(ControlType::ReadyToSend, send.seq);
      announcement.frame = FrameHeader{.envelope = send.envelope, .payload_bytes = send.payload.size()};
      if (block >= 0) {
        RegisteredBlock& memory = buffered_[static_cast<std::size_t>(block)].memory;
        std::memcpy(memory.data, send.payload.data(), send.payload.size());
        announcement.address = reinterpret_cast<std::uint64_t>(memory.data);
        announcement.rkey = memory.mr->rkey;
      }
      if (!post_control(peer, announcement)) {
        if (block >= 0) buffered_[static_cast<std::size_t>(block)].busy = false;
        break;
      }
      send.buffer_block = block;
      send.reported = true;
      completed.push_back(send.id);
      p.lent.push_back(send);
      p.sends.pop_front();
    }
  }
}

bool VerbsTransport::progress(Deadline deadline, std::vector<OpId>& completed) {
  rethrow_failure();
  const std::size_t before = completed.size();
  if (!anything_pending() && deadline.is_never())
    fail(ErrorCode::InvalidArgument,
         "rank {}: progress() without a deadline while no operation is pending would wait forever", rank_);
  const Clock::time_point spin_until = Clock::now() + options_.spin;
  bool armed = false;
  for (;;) {
    drain_async_events();
    int found = drain_completions(completed);
    if (!early_completions_.empty()) {
      completed.insert(completed.end(), early_completions_.begin(), early_completions_.end());
      early_completions_.clear();
    }
    for (int peer = 0; peer < size_; ++peer)
      if (peer != rank_) pump(peer);
    if (completed.size() > before) return true;
    rethrow_failure();
    if (deadline.expired()) return false;
    if (found > 0 || Clock::now() < spin_until) {
      armed = false;
      continue;
    }
    if (!armed) {
      // About to sleep while sends wait for their clear-to-send: complete them by copying them aside.
      // A schedule may post the receive that lets its peer go on only after such a send completed
      // (TCP completes a send once the kernel took the bytes), so waiting here could deadlock.
      buffer_waiting_sends(completed);
      if (completed.size() > before) return true;
      // Arm, then drain once more before sleeping: a completion that arrived before the arming raises
      // no event.
      if (ibv_req_notify_cq(cq_, 0) != 0)
        fail_transport(ErrorCode::System, "verbs: ibv_req_notify_cq failed");
      armed = true;
      continue;
    }
    pollfd fds[3] = {
        {channel_->fd, POLLIN, 0}, {port_->context()->async_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int ready = ::poll(fds, 3, deadline.poll_timeout_ms());
    if (ready < 0 && errno != EINTR) fail_errno("verbs: poll");
    if (ready > 0 && (fds[2].revents & POLLIN) && !aborted_.load(std::memory_order_acquire)) {
      // wake(): the caller has new work for this thread.
      std::uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(wake_fd_, &count, sizeof(count));
      return completed.size() > before;
    }
    if (ready > 0 && (fds[0].revents & POLLIN)) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      while (ibv_get_cq_event(channel_, &cq, &context) == 0) ++unacked_events_;
      if (unacked_events_ >= 64) {
        ibv_ack_cq_events(cq_, unacked_events_);
        unacked_events_ = 0;
      }
      armed = false;
    }
  }
}

}  // namespace

// ---- set-up through the store -----------------------------------------------------------------

namespace {

std::string qp_key(std::uint64_t comm_id, int from, int to) {
  return fmt::format("verbs/{}/qp/{}/{}", comm_id, from, to);
}
std::string ready_key(std::uint64_t comm_id, int rank) {
  return fmt::format("verbs/{}/ready/{}", comm_id, rank);
}

Duration remaining(const Deadline& deadline) {
  return std::chrono::duration_cast<Duration>(deadline.remaining());
}

}  // namespace

std::unique_ptr<Transport> connect_verbs_mesh(Store& store, int rank, int size, const VerbsOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "connect_verbs_mesh: rank {} is not in a group of size {}", rank, size);
  const Deadline deadline = Deadline::after(options.connect_timeout);
  auto transport = std::make_unique<VerbsTransport>(rank, size, verbs::open_device_port(options), options);
  if (size == 1) return transport;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank)
      store.set(qp_key(options.comm_id, rank, peer), verbs::encode_address(transport->local_address(peer)));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    std::string key = qp_key(options.comm_id, peer, rank);
    std::string bytes;
    try {
      bytes = store.get(key, remaining(deadline));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
      fail(
          ErrorCode::Timeout,
          "rank {}: verbs mesh set-up for comm {} timed out after {} ms: rank {} never published its "
          "queue-pair "
          "address (store key '{}'); is it running, with the same store, world size {} and CANOPY_TRANSPORT?",
          rank, options.comm_id, options.connect_timeout.count(), peer, key, size);
    }
    transport->connect(peer, verbs::decode_address(bytes, fmt::format("rank {}", peer)));
  }
  // Nobody sends before every receive queue it will reach is ready.
  store.set(ready_key(options.comm_id, rank), "1");
  std::vector<std::string> keys;
  for (int peer = 0; peer < size; ++peer) keys.push_back(ready_key(options.comm_id, peer));
  try {
    store.wait(keys, remaining(deadline));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    fail(ErrorCode::Timeout,
         "rank {}: verbs mesh set-up for comm {} timed out after {} ms waiting for every rank to "
         "connect its queue pairs: {}",
         rank, options.comm_id, options.connect_timeout.count(), e.what());
  }
  log::info("rank {}: verbs mesh of {} ranks for comm {} is up on {}", rank, size, options.comm_id,
            static_cast<VerbsTransport&>(*transport).port().describe());
  return transport;
}

std::string verbs_unavailable_reason(const VerbsOptions& options) {
  try {
    verbs::open_device_port(options);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace canopy::transport
