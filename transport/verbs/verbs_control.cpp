// The verbs control protocol: receives advertised to their senders (clear-to-send), sends copied aside
// and announced when the peer has not asked for them yet (ready-to-send), and the credits both spend.
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/frame.hpp"
#include "transport/verbs/queue_pairs.hpp"

namespace canopy::transport::verbs {

// Receives are advertised in order; each needs a staging slot (small) or a registration (large).
void VerbsLinks::advertise(int peer) {
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

void VerbsLinks::flush_outbox(int peer) {
  Peer& p = peers_[peer];
  while (!p.outbox.empty() && p.credits->can_send_message()) {
    if (!post_control(peer, p.outbox.front())) return;
    p.outbox.pop_front();
  }
}

// Posts one control message if a slot, send-queue room and a credit allow; false otherwise.
bool VerbsLinks::post_control(int peer, ControlMessage message) {
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

void VerbsLinks::handle_control(int peer, const ControlMessage& message) {
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

// A free registered block of at least `bytes`, allocating one (a power of two) within the limit;
// -1 when the limit is reached.
int VerbsLinks::acquire_buffer_block(std::size_t bytes) {
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

// Sends still waiting for their clear-to-send when the mesh is about to sleep: copy each aside,
// announce the copy (ReadyToSend: address, rkey, frame header) and report the send complete. The
// receiver reads the copy when its receive is posted, with no help from this rank's CPU, so this rank
// may go off and do anything (even exit: teardown waits for the reads). In order per peer, and only
// while the announcement can be posted at once, so that what is reported complete is on its way.
void VerbsLinks::buffer_waiting_sends(std::vector<OpId>& completed) {
  for (int peer : linked_) {
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

}  // namespace canopy::transport::verbs
