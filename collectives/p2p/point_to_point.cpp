#include "collectives/p2p/point_to_point.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy::collectives {
namespace {

constexpr std::size_t kListedOperations = 8;  // in a timeout's message

double seconds_since(Clock::time_point then) {
  return std::chrono::duration<double>(Clock::now() - then).count();
}

}  // namespace

PointToPoint::PointToPoint(std::unique_ptr<transport::Transport> transport, Settings settings,
                           EndCommunicator end, CallSequencer& progress)
    : transport_(std::move(transport)),
      settings_(settings),
      end_(std::move(end)),
      rank_(transport_->rank()),
      peers_(static_cast<std::size_t>(transport_->size())),
      progress_(progress) {}

PointToPoint::~PointToPoint() {
  close();
}

void PointToPoint::close() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    ended_ = Error(ErrorCode::Aborted, fmt::format("rank {}: the communicator was destroyed", rank_));
  }
  // The progress thread no longer drives this engine: what it never finished ends here, its buffers no
  // longer touched.
  const Error gone(
      ErrorCode::Aborted,
      fmt::format("rank {}: the communicator was destroyed while this point-to-point operation was "
                  "pending",
                  rank_));
  for (auto& [index, op] : operations_) op.work->finish(std::make_exception_ptr(gone));
  for (auto& [index, op] : inbox_) op.work->finish(std::make_exception_ptr(gone));
  operations_.clear();
  inbox_.clear();
}

Work PointToPoint::send(std::span<const std::byte> data, int peer, std::uint32_t tag) {
  Operation op;
  op.direction = Direction::Send;
  op.peer = peer;
  op.tag = tag;
  op.buffer = {const_cast<std::byte*>(data.data()), data.size()};  // never written: a send's buffer
  return submit(std::move(op));
}

Work PointToPoint::recv(std::span<std::byte> data, int peer, std::uint32_t tag) {
  Operation op;
  op.direction = Direction::Recv;
  op.peer = peer;
  op.tag = tag;
  op.buffer = data;
  return submit(std::move(op));
}

Work PointToPoint::recv_any(std::span<std::byte> data, int& source, std::uint32_t tag) {
  if (peers_.size() < 2)
    fail(ErrorCode::InvalidArgument,
         "rank {}: cannot receive from any rank in a group of 1: no rank can send", rank_);
  Operation op;
  op.direction = Direction::Recv;
  op.peer = kAnySource;
  op.tag = tag;
  op.buffer = data;
  op.source = &source;
  return submit(std::move(op));
}

Work PointToPoint::submit(Operation op) {
  const int size = static_cast<int>(peers_.size());
  const bool any_source = op.direction == Direction::Recv && op.peer == kAnySource && op.source != nullptr;
  if (!any_source && (op.peer < 0 || op.peer >= size || op.peer == rank_))
    fail(ErrorCode::InvalidArgument, "rank {}: cannot {} rank {} in a group of {}", rank_,
         op.direction == Direction::Send ? "send to" : "receive from", op.peer, size);
  auto state = std::make_shared<Work::State>();
  op.work = state;
  op.posted = Clock::now();
  op.deadline = Deadline(op.posted + settings_.timeout);
  {
    std::lock_guard lock(mutex_);
    if (ended_) {
      state->finish(std::make_exception_ptr(*ended_));
      return Work(state);
    }
    const OpIndex index = next_operation_++;
    inbox_.emplace(index, std::move(op));
    requests_.push_back(index);
    has_requests_.store(true);
  }
  progress_.side_work_arrived();
  return Work(state);
}

void PointToPoint::abort(const std::string& reason) {
  transport_->abort(reason);
}

void PointToPoint::start_send(OpIndex index) {
  const Operation& op = operations_.at(index);
  listen_to(op.peer);  // its ClearToSend comes back as a descriptor
  Peer& peer = peers_[static_cast<std::size_t>(op.peer)];
  if (peer.gone)
    throw Error(ErrorCode::PeerFailed,
                fmt::format("rank {}: {}: rank {} closed its connection", rank_, describe(op), op.peer));
  const std::uint64_t id = peer.next_message_id++;
  if (op.buffer.size() <= settings_.eager_bytes) {
    post_frame(op.peer, {P2PKind::Eager, op.tag, op.buffer.size(), id}, op.buffer, index);
  } else {
    post_frame(op.peer, {P2PKind::RequestToSend, op.tag, op.buffer.size(), id}, {}, std::nullopt);
    peer.awaiting_clear[id] = index;
  }
}

void PointToPoint::start_recv(OpIndex index) {
  const Operation& op = operations_.at(index);
  if (op.peer == kAnySource) {
    start_recv_any(index);
    return;
  }
  listen_to(op.peer);
  Peer& peer = peers_[static_cast<std::size_t>(op.peer)];
  if (auto it = peer.unmatched.find(op.tag); it != peer.unmatched.end() && !it->second.empty()) {
    const std::uint64_t arrival = it->second.front();
    it->second.pop_front();
    claim(index, arrival);
    return;
  }
  if (peer.gone)
    throw Error(ErrorCode::PeerFailed,
                fmt::format("rank {}: {}: rank {} closed its connection", rank_, describe(op), op.peer));
  peer.receives[op.tag].push_back(index);
}

void PointToPoint::start_recv_any(OpIndex index) {
  const std::uint32_t tag = operations_.at(index).tag;
  // The message that arrived first among those kept: arrival numbers grow in the order they came.
  std::optional<std::pair<int, std::uint64_t>> first;  // (peer, arrival)
  bool anyone_left = false;
  for (int from = 0; from < static_cast<int>(peers_.size()); ++from) {
    if (from == rank_) continue;
    listen_to(from);
    Peer& peer = peers_[static_cast<std::size_t>(from)];
    anyone_left = anyone_left || !peer.gone;
    const auto it = peer.unmatched.find(tag);
    if (it == peer.unmatched.end() || it->second.empty()) continue;
    if (!first || it->second.front() < first->second) first = {{from, it->second.front()}};
  }
  if (first) {
    peers_[static_cast<std::size_t>(first->first)].unmatched[tag].pop_front();
    bind_source(index, first->first);
    claim(index, first->second);
    return;
  }
  if (!anyone_left)
    throw Error(ErrorCode::PeerFailed, fmt::format("rank {}: {}: every other rank closed its connection",
                                                   rank_, describe(operations_.at(index))));
  any_source_receives_[tag].push_back(index);
}

std::optional<PointToPoint::OpIndex> PointToPoint::take_receive(int from, std::uint32_t tag) {
  Peer& peer = peers_[static_cast<std::size_t>(from)];
  const auto named = peer.receives.find(tag);
  const auto any = any_source_receives_.find(tag);
  const bool has_named = named != peer.receives.end() && !named->second.empty();
  const bool has_any = any != any_source_receives_.end() && !any->second.empty();
  // Operation numbers grow in posting order: the receive posted first takes the message, as in MPI.
  if (has_named && (!has_any || named->second.front() < any->second.front())) {
    const OpIndex receive = named->second.front();
    named->second.pop_front();
    return receive;
  }
  if (!has_any) return std::nullopt;
  const OpIndex receive = any->second.front();
  any->second.pop_front();
  bind_source(receive, from);
  return receive;
}

void PointToPoint::bind_source(OpIndex receive, int peer) {
  Operation& op = operations_.at(receive);
  op.peer = peer;
  *op.source = peer;
}

void PointToPoint::check_sizes(OpIndex receive, const P2PDescriptor& message) const {
  const Operation& op = operations_.at(receive);
  if (op.buffer.size() == message.bytes) return;
  fail(ErrorCode::Mismatch,
       "rank {}: point-to-point mismatch: this rank's {} met rank {}'s send of {} bytes with tag {} (its "
       "message "
       "#{} to rank {}); nothing was written",
       rank_, describe(op), op.peer, message.bytes, message.tag, message.id, rank_);
}

void PointToPoint::claim(OpIndex receive, std::uint64_t arrival_id) {
  Arrival& arrival = arrivals_.at(arrival_id);
  check_sizes(receive, arrival.descriptor);
  const int peer = operations_.at(receive).peer;
  if (arrival.descriptor.kind == P2PKind::RequestToSend) {
    peers_[static_cast<std::size_t>(peer)].awaiting_data[arrival.descriptor.id] = receive;
    post_frame(peer, {P2PKind::ClearToSend, 0, 0, arrival.descriptor.id}, {}, std::nullopt);
    arrivals_.erase(arrival_id);
    return;
  }
  if (!arrival.landed) {
    arrival.claimed_by = receive;  // finished when its payload lands
    return;
  }
  if (!arrival.bytes.empty())
    std::memcpy(operations_.at(receive).buffer.data(), arrival.bytes.data(), arrival.bytes.size());
  arrivals_.erase(arrival_id);
  complete(receive);
}

void PointToPoint::on_completed(transport::OpId id) {
  const auto node = in_transport_.extract(id);
  if (node.empty()) return;
  const Pending& pending = node.mapped();
  switch (pending.kind) {
    case Pending::Kind::DescriptorIn:
      on_descriptor(pending.peer);
      return;
    case Pending::Kind::PayloadIn:
      if (pending.operation) {
        complete(*pending.operation);
      } else {
        Arrival& arrival = arrivals_.at(*pending.arrival);
        arrival.landed = true;
        if (arrival.claimed_by) claim(*arrival.claimed_by, *pending.arrival);
      }
      expect_descriptor(pending.peer);
      return;
    case Pending::Kind::DescriptorOut:
      peers_[static_cast<std::size_t>(pending.peer)].descriptors_out.erase(pending.frame);
      if (pending.operation) complete(*pending.operation);
      return;
    case Pending::Kind::PayloadOut:
      if (pending.operation) complete(*pending.operation);
      return;
  }
}

void PointToPoint::on_descriptor(int from) {
  Peer& peer = peers_[static_cast<std::size_t>(from)];
  const P2PDescriptor message = decode_descriptor(peer.descriptor_in, from);
  auto take_receive = [&]() -> std::optional<OpIndex> {
    const auto receive = this->take_receive(from, message.tag);
    if (receive) check_sizes(*receive, message);
    return receive;
  };
  // A message no receive was posted for yet: kept, in order, for the receive that will come.
  auto keep_unmatched = [&]() -> std::uint64_t {
    const std::uint64_t id = next_arrival_++;
    peer.unmatched[message.tag].push_back(id);
    arrivals_[id].descriptor = message;
    return id;
  };
  switch (message.kind) {
    case P2PKind::Eager:
      if (const auto receive = take_receive()) {
        if (message.has_payload()) {
          expect_payload(from, operations_.at(*receive).buffer,
                         {Pending::Kind::PayloadIn, from, receive, {}, 0});
          return;
        }
        complete(*receive);
      } else {
        const std::uint64_t id = keep_unmatched();
        Arrival& arrival = arrivals_.at(id);
        if (message.has_payload()) {
          arrival.bytes.resize(message.bytes);
          expect_payload(from, arrival.bytes, {Pending::Kind::PayloadIn, from, {}, id, 0});
          return;
        }
        arrival.landed = true;
      }
      break;
    case P2PKind::RequestToSend:
      if (const auto receive = take_receive()) {
        peer.awaiting_data[message.id] = *receive;
        post_frame(from, {P2PKind::ClearToSend, 0, 0, message.id}, {}, std::nullopt);
      } else {
        keep_unmatched();
      }
      break;
    case P2PKind::ClearToSend: {
      const auto it = peer.awaiting_clear.find(message.id);
      if (it == peer.awaiting_clear.end())
        fail(ErrorCode::Protocol, "rank {}: rank {} cleared message #{}, which this rank never announced",
             rank_, from, message.id);
      const OpIndex send = it->second;
      peer.awaiting_clear.erase(it);
      const Operation& op = operations_.at(send);
      post_frame(from, {P2PKind::Data, op.tag, op.buffer.size(), message.id}, op.buffer, send);
      break;
    }
    case P2PKind::Data: {
      const auto it = peer.awaiting_data.find(message.id);
      if (it == peer.awaiting_data.end() || operations_.at(it->second).buffer.size() != message.bytes)
        fail(ErrorCode::Protocol,
             "rank {}: rank {} sent {} bytes of message #{}, which this rank did not ask for", rank_, from,
             message.bytes, message.id);
      const OpIndex receive = it->second;
      peer.awaiting_data.erase(it);
      if (message.has_payload()) {
        expect_payload(from, operations_.at(receive).buffer,
                       {Pending::Kind::PayloadIn, from, receive, {}, 0});
        return;
      }
      complete(receive);
      break;
    }
  }
  expect_descriptor(from);
}

transport::Envelope PointToPoint::frame_envelope(std::uint64_t frame, std::uint64_t bytes,
                                                 bool payload) const {
  transport::Envelope envelope;
  envelope.comm_id = settings_.comm_id;
  envelope.seq = frame;  // both ends count the frames between them: a lost or extra one shows at once
  envelope.collective = Collective::PointToPoint;
  envelope.count = bytes;
  envelope.step = payload ? 1 : 0;
  return envelope;
}

void PointToPoint::expect_descriptor(int from) {
  Peer& peer = peers_[static_cast<std::size_t>(from)];
  const transport::OpId id = transport_->post_recv(
      from, frame_envelope(peer.frames_in++, kP2PDescriptorBytes, false), peer.descriptor_in);
  in_transport_[id] = {Pending::Kind::DescriptorIn, from, {}, {}, 0};
}

void PointToPoint::listen_to(int from) {
  Peer& peer = peers_[static_cast<std::size_t>(from)];
  if (peer.listened) return;
  peer.listened = true;
  expect_descriptor(from);
}

void PointToPoint::expect_payload(int from, std::span<std::byte> into, Pending pending) {
  Peer& peer = peers_[static_cast<std::size_t>(from)];
  const transport::OpId id =
      transport_->post_recv(from, frame_envelope(peer.frames_in++, into.size(), true), into);
  in_transport_[id] = pending;
}

void PointToPoint::post_frame(int to, const P2PDescriptor& descriptor, std::span<const std::byte> payload,
                              std::optional<OpIndex> completes) {
  Peer& peer = peers_[static_cast<std::size_t>(to)];
  const std::uint64_t frame = peer.frames_out++;
  const P2PDescriptorBytes& bytes = peer.descriptors_out[frame] = encode(descriptor);
  const bool with_payload = descriptor.has_payload();
  const transport::OpId id =
      transport_->post_send(to, frame_envelope(frame, kP2PDescriptorBytes, false), bytes);
  in_transport_[id] = {Pending::Kind::DescriptorOut, to, with_payload ? std::nullopt : completes, {}, frame};
  if (!with_payload) return;
  const transport::OpId payload_id =
      transport_->post_send(to, frame_envelope(peer.frames_out++, payload.size(), true), payload);
  in_transport_[payload_id] = {Pending::Kind::PayloadOut, to, completes, {}, 0};
}

void PointToPoint::complete(OpIndex index) {
  auto node = operations_.extract(index);
  if (!node.empty()) node.mapped().work->finish(nullptr);
}

bool PointToPoint::involves(int peer) const {
  return std::any_of(operations_.begin(), operations_.end(),
                     [peer](const auto& entry) { return entry.second.peer == peer; });
}

void PointToPoint::peer_left(const transport::PeerFailedError& error) {
  const int peer = error.peer();
  // The transport dropped what it held toward the peer.
  std::erase_if(in_transport_, [peer](const auto& entry) { return entry.second.peer == peer; });
  if (involves(peer)) {
    fail_all(error);
    return;
  }
  log::debug("{} (no point-to-point operation was pending toward it)", error.what());
  peers_[static_cast<std::size_t>(peer)].gone = true;
  // A receive from any source waits on while some peer may still send.
  const bool anyone_left = std::any_of(peers_.begin(), peers_.end(), [&](const Peer& other) {
    return &other != &peers_[static_cast<std::size_t>(rank_)] && !other.gone;
  });
  const bool any_source_pending = std::any_of(any_source_receives_.begin(), any_source_receives_.end(),
                                              [](const auto& entry) { return !entry.second.empty(); });
  if (any_source_pending && !anyone_left) fail_all(error);
}

void PointToPoint::fail_all(const Error& error) {
  if (!failure_) {
    bool stopping = false;
    {
      std::lock_guard lock(mutex_);
      stopping = stopping_;
    }
    // Once the communicator is being destroyed there is nothing left to end.
    failure_ = end_ && !stopping ? end_(error) : error;
    transport_->abort(failure_->what());
    std::lock_guard lock(mutex_);
    ended_ = failure_;
  }
  // One exception each, owned by its Work alone: this thread keeps no reference its waiters could race with.
  for (auto& [index, op] : operations_) op.work->finish(std::make_exception_ptr(*failure_));
  operations_.clear();
  arrivals_.clear();
  any_source_receives_.clear();
  in_transport_.clear();
  for (Peer& peer : peers_) peer = Peer{};
}

Deadline PointToPoint::earliest_deadline() const {
  Deadline earliest = Deadline::never();
  for (const auto& [index, op] : operations_) earliest = earliest.earlier(op.deadline);
  return earliest;
}

void PointToPoint::expire_overdue() {
  for (const auto& [index, op] : operations_) {
    if (!op.deadline.expired()) continue;
    fail_all(
        Error(ErrorCode::Timeout,
              fmt::format("rank {}: {} timed out after {:.1f} s: {}{}", rank_, describe(op),
                          seconds_since(op.posted),
                          op.direction == Direction::Send ? fmt::format("rank {} did not receive it", op.peer)
                          : op.peer == kAnySource         ? std::string("no rank sent such a message")
                                                  : fmt::format("rank {} sent no such message", op.peer),
                          pending_list())));
    return;
  }
}

std::string PointToPoint::describe(const Operation& op) const {
  if (op.peer == kAnySource)
    return fmt::format("recv of {} bytes from any rank with tag {}", op.buffer.size(), op.tag);
  return op.direction == Direction::Send
             ? fmt::format("send of {} bytes to rank {} with tag {}", op.buffer.size(), op.peer, op.tag)
             : fmt::format("recv of {} bytes from rank {} with tag {}", op.buffer.size(), op.peer, op.tag);
}

std::string PointToPoint::pending_list() const {
  std::string text = fmt::format("\nrank {}'s pending point-to-point operations:", rank_);
  std::size_t listed = 0;
  for (const auto& [index, op] : operations_) {
    if (listed++ == kListedOperations) {
      text += fmt::format("\n  and {} more", operations_.size() - kListedOperations);
      break;
    }
    text += fmt::format("\n  {} (posted {:.1f} s ago)", describe(op), seconds_since(op.posted));
  }
  return text;
}

}  // namespace canopy::collectives
