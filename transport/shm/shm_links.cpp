#include "transport/shm/shm_links.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/little_endian.hpp"
#include "common/log.hpp"
#include "transport/shm/shm_dialer.hpp"
#include "transport/shm/unix_socket.hpp"

namespace canopy::transport {
namespace {

// Packets on a pair's socket: u8 kind, 7 bytes 0, u64 a, u64 b, u64 c, then text.
//   'O' offer: a ring of `a` bytes with nonce `b`, its memfd alongside; the nonce also lies at address `c`
//       of the sender's memory, for the receiver to try reading it there (single copy)
//   'A' accepted; `a` = 1 when the receiver will read large messages from the sender's memory
//   'R' refused (why)   'T' the sender's messages go over TCP (why): it made no ring
constexpr std::size_t kPacketHead = 32;
constexpr std::size_t kPacketBytes = 512;
constexpr char kOffer = 'O', kAccepted = 'A', kRefused = 'R', kOverTcp = 'T';

// Where the budget is short, a ring may be smaller than asked, down to this.
constexpr std::uint64_t kSmallestRing = 64 * 1024;

// A single copy moves at most this much per drive of its peer, so the other peers' messages move between.
constexpr std::uint64_t kCopyPiece = std::uint64_t{1} << 20;

// An InRing or SingleCopy cell's body: one word (a tail, an address).
std::uint64_t body_word(const std::byte* cell) {
  return little_endian::get<std::uint64_t>(cell + kCellBodyOffset);
}

void put_body_word(std::byte* cell, std::uint64_t value) {
  little_endian::put(cell + kCellBodyOffset, value);
}

// Reads `bytes` at `address` of process `process` into `into` (process_vm_readv): the bytes read, or -1.
long read_process_memory(pid_t process, std::uint64_t address, void* into, std::uint64_t bytes) {
  iovec local{into, bytes};
  iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), bytes};
  return ::process_vm_readv(process, &local, 1, &remote, 1, 0);
}

}  // namespace

ShmLinks::ShmLinks(int rank, std::vector<ShmPeerLink> peers, UniqueFd doorbell, const ShmOptions& options,
                   int host_ranks, const AbortFlag& abort, IoPart& fallback, Reroute reroute,
                   std::unique_ptr<ShmDialer> dialer)
    : rank_(rank),
      options_(options),
      host_ranks_(host_ranks),
      abort_(abort),
      fallback_(fallback),
      reroute_(std::move(reroute)),
      peers_(peers.size()),
      doorbell_(std::move(doorbell)),
      dialer_(std::move(dialer)) {
  for (std::size_t p = 0; p < peers.size(); ++p) {
    peers_[p].link = std::move(peers[p]);
    if (peers_[p].reached()) peers_[p].process = peer_process(peers_[p].link.socket.get());
  }
  poll_peers_.reserve(peers.size());
  sleeping_.reserve(peers.size());
}

ShmLinks::~ShmLinks() {
  for (const Peer& p : peers_) ShmBudget::rings.release(p.reserved);
}

void ShmLinks::check_postable(const Peer& p) const {
  if (p.failure) throw *p.failure;
}

void ShmLinks::post_send(OpId id, int peer, const Envelope& envelope, std::span<const std::byte> payload) {
  Peer& p = peers_[peer];
  check_postable(p);
  ensure_link(peer);
  p.sends.push_back(SendOp{.id = id, .envelope = envelope, .payload = payload});
}

void ShmLinks::post_recv(OpId id, int peer, const Envelope& envelope, std::span<std::byte> destination) {
  Peer& p = peers_[peer];
  check_postable(p);
  ensure_link(peer);
  p.recvs.push_back(
      RecvOp{.id = id, .envelope = envelope, .destination = destination.data(), .bytes = destination.size()});
}

bool ShmLinks::receives_in_place(int peer) const {
  return peers_[peer].in == Way::Ring;
}

void ShmLinks::post_recv_in_place(OpId id, int peer, const Envelope& envelope, std::uint64_t bytes,
                                  PieceSink& sink) {
  Peer& p = peers_[peer];
  check_postable(p);
  if (p.in != Way::Ring) IoPart::post_recv_in_place(id, peer, envelope, bytes, sink);
  p.recvs.push_back(RecvOp{.id = id, .envelope = envelope, .sink = &sink, .bytes = bytes});
}

bool ShmLinks::busy() const {
  return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.busy(); });
}

void ShmLinks::fail_peer(int peer, ErrorCode code, const std::string& what) {
  Peer& p = peers_[peer];
  p.failure = Error(code, what);
  p.sends.clear();
  p.copying.clear();
  p.recvs.clear();
  // As TcpLinks::fail_peer: a broken link is shut down at once, one out of step only by abort().
  if (code == ErrorCode::PeerFailed) ::shutdown(p.link.socket.get(), SHUT_RDWR);
  log::debug("{}", what);
  throw *p.failure;
}

void ShmLinks::fail_closed(int peer, const char* direction) {
  abort_.throw_if_raised(rank_);
  const Peer& p = peers_[peer];
  const std::size_t pending = p.sends.size() + p.copying.size() + p.recvs.size();
  const std::string what = fmt::format(
      "rank {}: connection to rank {} (shared memory on this host) closed: the peer closed it (end of "
      "stream), while {}; {} operation(s) to/from rank {} failed (did rank {} exit or crash?)",
      rank_, peer, direction, pending, peer, peer);
  try {
    fail_peer(peer, ErrorCode::PeerFailed, what);
  } catch (const Error&) {
    throw PeerFailedError(peer, what);
  }
}

void ShmLinks::send_control(int peer, char kind, std::uint64_t a, std::uint64_t b, std::uint64_t c, int pass,
                            const std::string& text) {
  std::array<std::byte, kPacketBytes> packet{};
  packet[0] = static_cast<std::byte>(kind);
  little_endian::put(&packet[8], a);
  little_endian::put(&packet[16], b);
  little_endian::put(&packet[24], c);
  const std::size_t length = std::min(text.size(), kPacketBytes - kPacketHead);
  std::memcpy(&packet[kPacketHead], text.data(), length);
  // A pair's socket carries a handful of packets in its whole life: a full one means the peer is gone.
  if (int error =
          send_packet(peers_[peer].link.socket.get(), std::span(packet).first(kPacketHead + length), pass);
      error != 0) {
    log::debug("rank {}: to rank {}'s socket: {}", rank_, peer, std::strerror(error));
    peers_[peer].closed = true;
  }
}

void ShmLinks::read_socket(int peer) {
  Peer& p = peers_[peer];
  std::array<std::byte, kPacketBytes> packet;
  while (!p.closed) {
    UniqueFd passed;
    const long n = receive_packet(p.link.socket.get(), packet, passed);
    if (n == -EAGAIN || n == -EWOULDBLOCK) return;
    if (n <= 0) {
      p.closed = true;  // end of stream or reset: the peer is gone (what it wrote into its ring still counts)
      return;
    }
    handle_packet(peer, std::span(packet).first(static_cast<std::size_t>(n)), std::move(passed));
  }
}

void ShmLinks::handle_packet(int peer, std::span<const std::byte> packet, UniqueFd passed) {
  Peer& p = peers_[peer];
  const char kind = packet.size() >= kPacketHead ? static_cast<char>(packet[0]) : '\0';
  const auto a = packet.size() >= kPacketHead ? little_endian::get<std::uint64_t>(&packet[8]) : 0;
  const auto b = packet.size() >= kPacketHead ? little_endian::get<std::uint64_t>(&packet[16]) : 0;
  const auto c = packet.size() >= kPacketHead ? little_endian::get<std::uint64_t>(&packet[24]) : 0;
  const std::string text(reinterpret_cast<const char*>(packet.data()) + std::min(packet.size(), kPacketHead),
                         packet.size() - std::min(packet.size(), kPacketHead));
  if (kind == kOffer && p.in == Way::None) return accept_ring(peer, a, b, c, std::move(passed));
  if (kind == kAccepted && p.out == Way::Offered) {
    p.out = Way::Ring;
    p.single_copy_out = a == 1;
    p.probe.reset();
    return;
  }
  if (kind == kRefused && p.out == Way::Offered)
    return fall_back(peer, true, fmt::format("rank {} could not map the ring: {}", peer, text));
  if (kind == kOverTcp && p.in == Way::None) return fall_back(peer, false, text);
  fail_peer(
      peer, ErrorCode::Protocol,
      fmt::format("rank {}: from rank {} (shared memory): a control packet '{}' of {} bytes out of turn",
                  rank_, peer, kind, packet.size()));
}

void ShmLinks::offer_ring(int peer) {
  Peer& p = peers_[peer];
  // No larger than an equal share would give every direction from this rank: the pairs that talk first
  // must not leave the rest to the smallest rings, or to TCP.
  const std::uint64_t fair = options_.host_budget_bytes / static_cast<std::uint64_t>(host_ranks_) /
                             static_cast<std::uint64_t>(std::max(1, host_ranks_ - 1));
  std::uint64_t capacity = options_.ring_bytes;
  const std::uint64_t smallest = std::min(options_.ring_bytes, kSmallestRing);
  while (capacity > smallest && ring_segment_bytes(capacity) > fair) capacity /= 2;
  while (capacity >= smallest &&
         !ShmBudget::rings.reserve(ring_segment_bytes(capacity), options_.host_budget_bytes, host_ranks_))
    capacity /= 2;
  std::string why;
  if (capacity < smallest) {
    why = fmt::format("this host's budget for rings (CANOPY_SHM_BYTES={}, {} rank(s) sharing it) is spent",
                      options_.host_budget_bytes, host_ranks_);
  } else {
    try {
      UniqueFd memfd;
      RingSegment segment = RingSegment::create(capacity, memfd);
      const std::uint64_t nonce = segment.nonce();
      p.sending.emplace(std::move(segment));
      p.reserved = ring_segment_bytes(capacity);
      p.out = Way::Offered;
      std::uint64_t probe_address = 0;
      if (options_.single_copy_bytes > 0) {
        p.probe = std::make_unique<std::uint64_t>(nonce);
        probe_address = reinterpret_cast<std::uintptr_t>(p.probe.get());
      }
      send_control(peer, kOffer, capacity, nonce, probe_address, memfd.get());
      return;
    } catch (const Error& e) {
      ShmBudget::rings.release(ring_segment_bytes(capacity));
      why = e.what();
    }
  }
  send_control(peer, kOverTcp, 0, 0, 0, -1, why);
  fall_back(peer, true, why);
}

void ShmLinks::accept_ring(int peer, std::uint64_t capacity, std::uint64_t nonce, std::uint64_t probe_address,
                           UniqueFd passed) {
  Peer& p = peers_[peer];
  try {
    if (!passed.valid()) fail(ErrorCode::Protocol, "no descriptor came with the offer");
    p.receiving.emplace(RingSegment::attach(passed.get(), capacity, nonce));
    p.in = Way::Ring;
    p.single_copy_in = probe_address != 0 && probe_single_copy(p, probe_address, nonce);
    send_control(peer, kAccepted, p.single_copy_in ? 1 : 0);
  } catch (const Error& e) {
    send_control(peer, kRefused, 0, 0, 0, -1, e.what());
    fall_back(peer, false, e.what());
  }
}

bool ShmLinks::probe_single_copy(const Peer& p, std::uint64_t address, std::uint64_t expected) const {
  std::uint64_t value = 0;
  const bool read =
      p.process > 0 && read_process_memory(p.process, address, &value, sizeof(value)) == sizeof(value);
  if (read && value == expected) return true;
  // Said once per process: without it large messages copy through the rings, twice.
  static std::once_flag said;
  const int error = errno;
  std::call_once(said, [&] {
    log::info(
        "rank {}: large messages within this host copy through the rings, not straight between the ranks' "
        "buffers: {}",
        rank_,
        !read ? fmt::format("process_vm_readv: {} (a container without CAP_SYS_PTRACE or a seccomp profile "
                            "that forbids it, or Yama's ptrace_scope)",
                            p.process > 0 ? std::strerror(error) : "the peer's process id is not known here")
              : std::string("process_vm_readv read another value than the peer's"));
  });
  return false;
}

void ShmLinks::ring_doorbell(int peer) {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(peers_[peer].link.doorbell.get(), &one, sizeof(one));
}

void ShmLinks::write_frames(int peer, Completions& done) {
  Peer& p = peers_[peer];
  RingProducer& ring = *p.sending;
  bool wrote = false;
  while (!p.sends.empty()) {
    SendOp& op = p.sends.front();
    const std::uint64_t size = op.payload.size();
    if (!op.header_written) {
      if (!ring.cell_free()) break;
      std::byte* cell = ring.next_cell();
      const FrameBytes header = encode_frame(FrameHeader{.envelope = op.envelope, .payload_bytes = size});
      std::memcpy(cell, header.data(), header.size());
      wrote = true;
      if (size <= kInlineBytes) {
        if (size > 0) std::memcpy(cell + kCellBodyOffset, op.payload.data(), size);
        ring.stamp(CellBody::Inline);
        bytes_moved_ += size;
        done.ids.push_back(op.id);
        p.sends.pop_front();
        continue;
      }
      if (p.single_copy_out && suits_single_copy(op.envelope.collective, size, options_.single_copy_bytes)) {
        put_body_word(cell, reinterpret_cast<std::uintptr_t>(op.payload.data()));
        ring.stamp(CellBody::SingleCopy);
        p.copying.push_back(CopyWait{.id = op.id, .copies = ++p.copies_posted});
        p.sends.pop_front();
        continue;
      }
      // What fits now goes before the stamp: a payload of up to a slot is whole when the receiver sees it.
      write_piece(ring, op);
      put_body_word(cell, ring.tail());
      ring.stamp(CellBody::InRing);
      op.header_written = true;
    }
    while (op.written < size && write_piece(ring, op)) {
      wrote = true;
      ring.publish_tail();  // the consumer copies this slot while the next is written
    }
    if (op.written < size) break;
    done.ids.push_back(op.id);
    p.sends.pop_front();
  }
  if (wrote && ring.consumer_to_wake()) ring_doorbell(peer);
}

bool ShmLinks::write_piece(RingProducer& ring, SendOp& op) {
  const std::uint64_t left = op.payload.size() - op.written;
  const std::uint64_t room = ring.writable(std::min(round_up_to_line(left), options_.slot_bytes));
  if (room == 0) return false;
  // Whole lines, except the payload's last piece, whose padding is skipped.
  const std::uint64_t n = std::min({left, room, options_.slot_bytes});
  ring.write(op.payload.data() + op.written, n, n == left ? round_up_to_line(n) : n);
  op.written += n;
  bytes_moved_ += n;
  return true;
}

void ShmLinks::finish_copies(Peer& p, Completions& done) {
  const std::uint64_t copied = p.sending->copied();
  for (; !p.copying.empty() && p.copying.front().copies <= copied; p.copying.pop_front())
    done.ids.push_back(p.copying.front().id);
}

void ShmLinks::read_frames(int peer, Completions& done) {
  Peer& p = peers_[peer];
  RingConsumer& ring = *p.receiving;
  bool moved = false;
  while (!p.recvs.empty()) {
    RecvOp& op = p.recvs.front();
    if (!op.header_checked) {
      CellBody body{};
      const std::byte* cell = ring.ready_cell(body);
      if (cell == nullptr) break;
      const bool whole = take_cell(peer, op, cell, body, done);
      ring.release_cell();
      moved = true;
      if (whole) {
        p.recvs.pop_front();
        continue;
      }
    }
    const std::uint64_t before = op.received;
    if (op.body == CellBody::InRing)
      read_ring_payload(p, op);
    else
      copy_piece(peer, op);
    moved = moved || op.received > before;
    if (op.received < op.bytes) break;
    if (op.body == CellBody::SingleCopy) ring.count_copied();
    done.ids.push_back(op.id);
    p.recvs.pop_front();
  }
  if (!moved) return;
  ring.publish();
  if (ring.producer_to_wake()) ring_doorbell(peer);
}

bool ShmLinks::take_cell(int peer, RecvOp& op, const std::byte* cell, CellBody body, Completions& done) {
  Peer& p = peers_[peer];
  const std::uint64_t word = body_word(cell);
  // The header first: no payload byte may reach the destination before it is checked.
  try {
    const FrameHeader header =
        decode_frame(std::span<const std::byte, kFrameHeaderSize>(cell, kFrameHeaderSize));
    check_frame(header, op.envelope, op.bytes, rank_, peer);
    if (!body_fits(p, body, op.bytes, word))
      fail(ErrorCode::Protocol, "a cell of kind {} for a payload of {} bytes", static_cast<int>(body),
           op.bytes);
    if (header.payload_bytes > 0) done.arrived_flags |= header.envelope.flags;
  } catch (const Error& e) {
    // The ring is out of step with what this rank expects: nothing more can be read from it.
    fail_peer(peer, e.code(),
              e.code() == ErrorCode::Protocol
                  ? fmt::format("rank {}: from rank {} (shared memory): {}", rank_, peer, e.what())
                  : std::string(e.what()));
  }
  op.body = body;
  op.header_checked = true;
  if (body == CellBody::Inline) {
    if (op.bytes > 0) deliver(op, 0, std::span(cell + kCellBodyOffset, op.bytes));
    bytes_moved_ += op.bytes;
    done.ids.push_back(op.id);
    return true;
  }
  if (body == CellBody::InRing)
    p.receiving->note_tail(word);
  else
    op.source = word;
  return false;
}

bool ShmLinks::body_fits(Peer& p, CellBody body, std::uint64_t bytes, std::uint64_t word) {
  switch (body) {
    case CellBody::Inline:
      return bytes <= kInlineBytes;
    case CellBody::InRing:  // the tail it gives lies within one ring ahead of what was read
      return bytes > kInlineBytes && word >= p.receiving->head() &&
             word - p.receiving->head() <= p.receiving->capacity();
    case CellBody::SingleCopy:
      return bytes > kInlineBytes && p.single_copy_in;
  }
  return false;
}

void ShmLinks::deliver(RecvOp& op, std::uint64_t offset, std::span<const std::byte> piece) {
  if (op.sink != nullptr)
    op.sink->consume(offset, piece);
  else
    std::memcpy(op.destination + offset, piece.data(), piece.size());
}

void ShmLinks::read_ring_payload(Peer& p, RecvOp& op) {
  RingConsumer& ring = *p.receiving;
  while (op.received < op.bytes) {
    const std::uint64_t available = ring.readable();
    if (available == 0) return;
    const std::uint64_t n =
        ring.contiguous(ring.head(), std::min({available, op.bytes - op.received, options_.slot_bytes}));
    deliver(op, op.received, std::span(ring.at(ring.head()), n));
    op.received += n;
    bytes_moved_ += n;
    ring.release(op.received == op.bytes ? round_up_to_line(n) : n);
    ring.publish();  // the producer may fill the slot again while this rank reads the next
  }
}

void ShmLinks::copy_piece(int peer, RecvOp& op) {
  Peer& p = peers_[peer];
  std::uint64_t n = std::min(op.bytes - op.received, kCopyPiece);
  std::byte* into = op.destination + op.received;
  if (op.sink != nullptr) {
    if (bounce_.empty()) bounce_.resize(options_.slot_bytes);
    n = std::min<std::uint64_t>(n, bounce_.size());
    into = bounce_.data();
  }
  const long got = read_process_memory(p.process, op.source + op.received, into, n);
  const int error = errno;
  // A peer that is gone may have left its process id to another process: nothing read then counts.
  if (peer_gone(p)) {
    p.closed = true;
    fail_closed(peer, "receiving");
  }
  if (got != static_cast<long>(n))
    fail_peer(peer, ErrorCode::Protocol,
              fmt::format("rank {}: reading {} bytes of rank {}'s buffer (single copy, process_vm_readv): {}",
                          rank_, n, peer, got < 0 ? std::strerror(error) : "a partial read"));
  if (op.sink != nullptr) op.sink->consume(op.received, std::span(into, n));
  op.received += n;
  bytes_moved_ += n;
}

bool ShmLinks::peer_gone(const Peer& p) const {
  pollfd socket{p.link.socket.get(), POLLRDHUP, 0};
  return ::poll(&socket, 1, 0) > 0 && (socket.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}
void ShmLinks::drive_peer(int peer, Completions& done) {
  Peer& p = peers_[peer];
  // What a peer copied before it left counts: its copy count is read before its end is judged.
  if (!p.copying.empty()) finish_copies(p, done);
  if (!p.sends.empty()) {
    if (p.closed) fail_closed(peer, "sending");
    if (p.out == Way::None) offer_ring(peer);
    if (p.out == Way::Ring) write_frames(peer, done);
  }
  if (!p.recvs.empty() && p.in == Way::Ring) read_frames(peer, done);
  // What a closed peer wrote before it went is read above; what is still awaited from it never comes.
  if (p.closed && p.busy()) fail_closed(peer, p.recvs.empty() ? "sending" : "receiving");
}

void ShmLinks::drive(Pass pass, Completions& done) {
  if (dialer_) take_links();
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = peers_[i];
    if (!p.reached() || p.failure) continue;
    const int peer = static_cast<int>(i);
    // The socket brings offers and answers (and says a peer died): read where the poll() said so, and
    // while this rank waits on nothing but the socket (a ring offered, or the first message awaited).
    const bool awaits_socket = p.out == Way::Offered || (p.in == Way::None && !p.recvs.empty());
    if (pass == Pass::Polled ? p.socket_ready : awaits_socket) {
      p.socket_ready = false;
      read_socket(peer);
    }
    if (p.busy()) drive_peer(peer, done);
  }
}

bool ShmLinks::awaits_ring_in(const Peer& p) {
  return !p.recvs.empty() && p.in == Way::Ring;
}

bool ShmLinks::awaits_ring_out(const Peer& p) {
  return (!p.sends.empty() || !p.copying.empty()) && p.out == Way::Ring;
}

bool ShmLinks::can_move_in(Peer& p) {
  const RecvOp& op = p.recvs.front();
  CellBody body{};
  if (!op.header_checked) return p.receiving->ready_cell(body) != nullptr;
  return op.body == CellBody::SingleCopy || p.receiving->readable() > 0;  // a copy needs no one
}

bool ShmLinks::can_move_out(Peer& p) {
  RingProducer& ring = *p.sending;
  if (!p.copying.empty() && ring.copied() >= p.copying.front().copies) return true;
  if (p.sends.empty()) return false;
  return p.sends.front().header_written ? ring.writable(kRingLine) >= kRingLine : ring.cell_free();
}

bool ShmLinks::prepare_to_block(std::vector<pollfd>& fds) {
  sleeping_.clear();
  poll_peers_.clear();
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = peers_[i];
    if (!p.reached() || p.failure) continue;
    const bool awaits_in = awaits_ring_in(p);
    const bool awaits_out = awaits_ring_out(p);
    if (awaits_in) p.receiving->announce_sleep(true);
    if (awaits_out) p.sending->announce_sleep(true);
    if (awaits_in || awaits_out) sleeping_.push_back(static_cast<int>(i));
  }
  // Announced, then checked: what the peer published before it could see the announcement is found here.
  for (int peer : sleeping_) {
    Peer& p = peers_[peer];
    if ((awaits_ring_in(p) && can_move_in(p)) || (awaits_ring_out(p) && can_move_out(p))) return false;
  }
  fds.push_back({doorbell_.get(), POLLIN, 0});
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    const Peer& p = peers_[i];
    if (!p.reached() || p.failure || p.closed) continue;
    fds.push_back({p.link.socket.get(), POLLIN, 0});
    poll_peers_.push_back(static_cast<int>(i));
  }
  const std::size_t before = fds.size();
  wake_by_ = Clock::time_point::max();
  if (dialer_) dialer_->prepare_to_block(fds, wake_by_);
  dialer_polls_ = fds.size() - before;
  return true;
}

void ShmLinks::after_poll(std::span<const pollfd> fds) {
  for (int peer : sleeping_) {
    Peer& p = peers_[peer];
    if (p.receiving) p.receiving->announce_sleep(false);
    if (p.sending) p.sending->announce_sleep(false);
  }
  sleeping_.clear();
  if (fds.empty()) return;
  if (fds[0].revents != 0) {
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(doorbell_.get(), &count, sizeof(count));
  }
  for (std::size_t i = 1; i < fds.size() && i <= poll_peers_.size(); ++i)
    if (fds[i].revents != 0) peers_[poll_peers_[i - 1]].socket_ready = true;
  if (dialer_ && fds.size() >= 1 + poll_peers_.size() + dialer_polls_)
    dialer_->after_poll(fds.subspan(1 + poll_peers_.size(), dialer_polls_));
}

void ShmLinks::shut_down() {
  std::lock_guard lock(links_mutex_);
  shut_ = true;
  for (const Peer& p : peers_)
    if (p.link.socket.valid()) ::shutdown(p.link.socket.get(), SHUT_RDWR);
}

}  // namespace canopy::transport
