// The verbs data path: posting, RDMA writes and reads in chunks, completions, what the mesh's progress()
// drives and the sleep it prepares on the completion channel, and the errors that make the links unusable.
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/frame.hpp"
#include "transport/verbs/queue_pairs.hpp"

namespace canopy::transport::verbs {

void VerbsLinks::fail_transport(ErrorCode code, const std::string& message) {
  if (!failure_) failure_.emplace(code, message);
  throw *failure_;
}

void VerbsLinks::rethrow_failure() const {
  abort_.throw_if_raised(rank_);
  if (failure_) throw *failure_;
}

void VerbsLinks::check_usable(int peer, const char* call) {
  rethrow_failure();
  check_peer(rank_, size_, peer, call);
  if (index_of_[peer] < 0)
    fail(ErrorCode::InvalidArgument, "rank {}: {} with rank {}, which has no verbs link", rank_, call, peer);
}

void VerbsLinks::post_send(OpId id, int peer, const Envelope& envelope, std::span<const std::byte> payload) {
  check_usable(peer, "post_send");
  Peer& p = peers_[peer];
  PendingSend send;
  send.id = id;
  send.envelope = envelope;
  send.payload = payload;
  send.seq = p.next_send_seq++;
  p.sends.push_back(send);
  pump(peer);
}

void VerbsLinks::post_recv(OpId id, int peer, const Envelope& envelope, std::span<std::byte> destination) {
  check_usable(peer, "post_recv");
  Peer& p = peers_[peer];
  PendingRecv recv;
  recv.id = id;
  recv.envelope = envelope;
  recv.destination = destination;
  recv.seq = p.next_recv_seq++;
  p.recvs.push_back(recv);
  pump(peer);
}

// Moves everything forward that resources allow, in an order that keeps each stream FIFO.
void VerbsLinks::pump(int peer) {
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

// Pairs posted sends with arrived clear-to-sends, in order, after checking they describe one message.
void VerbsLinks::start_writes(int peer) {
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
void VerbsLinks::post_writes(int peer) {
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

int VerbsLinks::drain_completions(std::vector<OpId>& completed) {
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
    completions_reaped_ += static_cast<std::uint64_t>(n);
    for (int i = 0; i < n; ++i) handle_completion(wcs[i], completed);
    total += n;
    if (n < 32) return total;
  }
}

namespace {

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

}  // namespace

void VerbsLinks::handle_completion(const ibv_wc& wc, std::vector<OpId>& completed) {
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

PendingRecv* VerbsLinks::find_recv(int peer, std::uint32_t seq) {
  for (PendingRecv& recv : peers_[peer].recvs)
    if (recv.seq == seq) return &recv;
  return nullptr;
}

// The payload of receive #seq is in place (written, or read): copy it out of staging, release what it
// held, report it. Receives complete by number, not in posting order: a read may finish after the
// write of a later message.
void VerbsLinks::finish_recv(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
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

void VerbsLinks::handle_arrival(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
  finish_recv(peer, seq, completed);
}

// The sender announced a copy of message #seq: check its header against this receive before a byte
// moves, then read it into the place this receive would have advertised.
void VerbsLinks::start_read(int peer, PendingRecv& recv, const ControlMessage& announcement) {
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
void VerbsLinks::post_reads(int peer) {
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

void VerbsLinks::handle_read_done(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
  finish_recv(peer, seq, completed);
  peers_[peer].outbox.push_back(control(ControlType::ReadDone, seq));
}

void VerbsLinks::handle_write_done(int peer, std::uint32_t seq, std::vector<OpId>& completed) {
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

void VerbsLinks::drain_async_events() {
  ibv_async_event event{};
  while (ibv_get_async_event(port_->context(), &event) == 0) {
    const ibv_event_type type = event.event_type;
    int peer = -1;
    if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR || type == IBV_EVENT_QP_ACCESS_ERR) {
      for (int r : linked_)
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

bool VerbsLinks::anything_pending() const {
  return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.has_pending(); });
}

// One round of the mesh's progress(): the device's events, the completions, and every peer's protocol moved
// on.
void VerbsLinks::drive(Pass pass, Completions& done) {
  rethrow_failure();
  // Reading the event descriptor is a system call: not on every round of a spin over the rings.
  if (pass != Pass::Spin || async_event_ready_) {
    async_event_ready_ = false;
    drain_async_events();
  }
  drain_completions(done.ids);
  if (!early_completions_.empty()) {
    done.ids.insert(done.ids.end(), early_completions_.begin(), early_completions_.end());
    early_completions_.clear();
  }
  for (int peer : linked_) pump(peer);
}

bool VerbsLinks::prepare_to_block(std::vector<pollfd>& fds) {
  if (!early_completions_.empty()) return false;
  // About to sleep while sends wait for their clear-to-send: complete them by copying them aside.
  // A schedule may post the receive that lets its peer go on only after such a send completed
  // (TCP completes a send once the kernel took the bytes), so waiting here could deadlock.
  buffer_waiting_sends(early_completions_);
  if (!early_completions_.empty()) return false;
  // Arm, then poll once more before sleeping: a completion that arrived before the arming raises no
  // event. What that finds is driven (and reported) before the mesh decides again.
  if (ibv_req_notify_cq(cq_, 0) != 0) fail_transport(ErrorCode::System, "verbs: ibv_req_notify_cq failed");
  if (drain_completions(early_completions_) > 0) return false;
  fds.push_back({channel_->fd, POLLIN, 0});
  fds.push_back({port_->context()->async_fd, POLLIN, 0});
  return true;
}

void VerbsLinks::after_poll(std::span<const pollfd> fds) {
  if (fds.size() < 2) return;  // prepare_to_block() found work instead
  if (fds[1].revents != 0) async_event_ready_ = true;
  if (fds[0].revents & POLLIN) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv_get_cq_event(channel_, &cq, &context) == 0) ++unacked_events_;
    if (unacked_events_ >= 64) {
      ibv_ack_cq_events(cq_, unacked_events_);
      unacked_events_ = 0;
    }
  }
}

}  // namespace canopy::transport::verbs
