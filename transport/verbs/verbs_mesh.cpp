// The verbs mesh's set-up through the store (every rank publishes a queue-pair address per peer and
// connects to the peers' addresses), the queue pairs' creation and teardown, and the registered memory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "common/cpu_list.hpp"
#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/spin_rule.hpp"
#include "transport/verbs/queue_pairs.hpp"

namespace canopy::transport::verbs {

RegisteredBlock register_block(ibv_pd* pd, std::size_t bytes, const char* what, int access) {
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

VerbsLinks::VerbsLinks(int rank, int size, std::span<const int> peers, std::unique_ptr<DevicePort> port,
                       const VerbsOptions& options, const AbortFlag& abort)
    : rank_(rank),
      size_(size),
      linked_(peers.begin(), peers.end()),
      index_of_(static_cast<std::size_t>(size), -1),
      options_(options),
      spin_(choose_spin(options.spin, options.local_size > 0 ? options.local_size : size,
                        options.host_cores > 0 ? options.host_cores : usable_cores(), kDefaultVerbsSpin)),
      port_(std::move(port)),
      peers_(static_cast<std::size_t>(size)),
      abort_(abort) {
  for (std::size_t i = 0; i < linked_.size(); ++i) index_of_[linked_[i]] = static_cast<int>(i);
  // Partly built resources are released by teardown(), which copes with any prefix of this.
  try {
    ibv_context* context = port_->context();
    pd_ = ibv_alloc_pd(context);
    if (pd_ == nullptr) fail_errno("verbs: ibv_alloc_pd");
    channel_ = ibv_create_comp_channel(context);
    if (channel_ == nullptr) fail_errno("verbs: ibv_create_comp_channel");
    int cq_entries =
        std::max<int>(1, static_cast<int>(linked_.size())) * (kReceiveSlots + kMaxSendRequests) + 16;
    cq_ = ibv_create_cq(context, cq_entries, nullptr, channel_, 0);
    if (cq_ == nullptr) fail_errno(fmt::format("verbs: ibv_create_cq of {} entries", cq_entries));
    for (int fd : {channel_->fd, context->async_fd})
      if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) fail_errno("verbs: fcntl O_NONBLOCK");

    const auto n = std::max<std::size_t>(1, linked_.size());
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
    local_psn_.resize(static_cast<std::size_t>(size));
    for (int peer : linked_) {
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

VerbsLinks::~VerbsLinks() {
  teardown();
}

QpAddress VerbsLinks::local_address(int peer) const {
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
void VerbsLinks::connect(int peer, const QpAddress& remote) {
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

// Memory may only be deregistered once the device can no longer touch it: move every queue pair to
// ERR (flushing what is posted), reap every completion, then free. If the completions do not all come
// back in time, the memory is leaked rather than freed under a live DMA.
// Sends already reported complete (buffered) still owe the peer their bytes, as a closed TCP socket
// still delivers what the kernel took: keep serving clear-to-sends until they are written, within a
// bound, and say so if they could not be.
void VerbsLinks::deliver_buffered_sends() {
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
      for (int peer : linked_) pump(peer);
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

void VerbsLinks::teardown() {
  bool reaped = true;
  if (cq_ != nullptr && !failure_ && !abort_.raised()) deliver_buffered_sends();
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
  if (!reaped) (void)port_.release();  // the context owns what was leaked
}

std::byte* VerbsLinks::control_slot(int peer, int slot, bool receive) const {
  std::size_t index = index_of(peer) * (kReceiveSlots + kControlSendSlots) +
                      static_cast<std::size_t>(receive ? slot : kReceiveSlots + slot);
  return control_.data + index * kControlSlotBytes;
}

std::byte* VerbsLinks::staging_slot(int peer, int slot, bool receive) const {
  std::size_t index =
      index_of(peer) * 2 * kStagingSlots + static_cast<std::size_t>((receive ? kStagingSlots : 0) + slot);
  return staging_.data + index * kStagingSlotBytes;
}

void VerbsLinks::post_control_receive(int peer, int slot) {
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

}  // namespace canopy::transport::verbs

namespace canopy::transport {

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

VerbsPart connect_verbs_links(Store& store, int rank, int size, const VerbsOptions& options,
                              std::span<const int> peers, const AbortFlag& abort) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "connect_verbs_links: rank {} is not in a group of size {}", rank, size);
  for (int peer : peers)
    if (peer < 0 || peer >= size || peer == rank)
      fail(ErrorCode::InvalidArgument, "connect_verbs_links: rank {} cannot link with rank {} of {}", rank,
           peer, size);
  const Deadline deadline = Deadline::after(options.connect_timeout);
  auto links = std::make_unique<verbs::VerbsLinks>(rank, size, peers, verbs::open_device_port(options),
                                                   options, abort);
  VerbsPart part{nullptr, links->spin(), links->port().describe()};
  if (peers.empty()) {
    part.links = std::move(links);
    return part;
  }
  for (int peer : peers)
    store.set(qp_key(options.comm_id, rank, peer), verbs::encode_address(links->local_address(peer)));
  for (int peer : peers) {
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
    links->connect(peer, verbs::decode_address(bytes, fmt::format("rank {}", peer)));
  }
  // Nobody sends before every receive queue it will reach is ready: the peers' readiness is what counts.
  store.set(ready_key(options.comm_id, rank), "1");
  std::vector<std::string> keys;
  for (int peer : peers) keys.push_back(ready_key(options.comm_id, peer));
  try {
    store.wait(keys, remaining(deadline));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    fail(ErrorCode::Timeout,
         "rank {}: verbs mesh set-up for comm {} timed out after {} ms waiting for every rank to "
         "connect its queue pairs: {}",
         rank, options.comm_id, options.connect_timeout.count(), e.what());
  }
  log::debug("rank {}: verbs links with {} rank(s) of comm {} are up on {}", rank, peers.size(),
             options.comm_id, part.port);
  part.links = std::move(links);
  return part;
}

std::unique_ptr<Transport> connect_verbs_mesh(Store& store, int rank, int size, const VerbsOptions& options) {
  auto mesh = std::make_unique<MeshTransport>(rank, size, "verbs");
  std::vector<int> peers;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) peers.push_back(peer);
  VerbsPart part = connect_verbs_links(store, rank, size, options, peers, mesh->abort_state());
  mesh->add_part(std::move(part.links), part.spin);  // part 0: every peer's route already
  return mesh;
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
