#include "transport/tcp/tcp_socket_transport.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy::transport {
namespace {

// One syscall moves at most this much: keeps every count far from ssize_t limits, while still letting
// the kernel take whatever fits in the socket buffer (never Asio's 64 KiB slices).
constexpr std::uint64_t kMaxBytesPerCall = std::uint64_t{1} << 30;
// Payloads beyond this are refused up front, so that header + payload can never overflow a u64.
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 62;

// While a peer is sent to and received from at once, each direction moves this much before the other's turn.
constexpr std::uint64_t kDuplexSlice = std::uint64_t{1} << 20;
// Read-ahead per peer: many small frames per recv(); payloads at least this large skip it.
constexpr std::size_t kInboxBytes = 64 * 1024;

bool would_block(int error) {
  return error == EAGAIN || error == EWOULDBLOCK;
}

}  // namespace

TcpSocketTransport::TcpSocketTransport(int rank, int size, std::vector<PeerLink> links,
                                       std::chrono::microseconds spin)
    : rank_(rank), size_(size), spin_(spin), peers_(static_cast<std::size_t>(size)) {
  if (links.size() != static_cast<std::size_t>(size))
    fail(ErrorCode::InvalidArgument, "TcpSocketTransport: {} links for a group of {}", links.size(), size);
  for (int p = 0; p < size; ++p) {
    peers_[p].link = std::move(links[p]);
    if (p != rank) peers_[p].inbox.resize(kInboxBytes);
  }
  wake_fd_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_.valid()) fail_errno("eventfd");
  poll_fds_.reserve(static_cast<std::size_t>(size) + 1);
  poll_peers_.reserve(static_cast<std::size_t>(size));
}

TcpSocketTransport::~TcpSocketTransport() = default;

void TcpSocketTransport::check_postable(int peer, const char* call) const {
  abort_.throw_if_raised(rank_);
  check_peer(rank_, size_, peer, call);
  if (peers_[peer].failure) throw *peers_[peer].failure;
}

OpId TcpSocketTransport::post_send(int peer, const Envelope& envelope, std::span<const std::byte> payload) {
  check_postable(peer, "post_send");
  if (payload.size() > kMaxPayloadBytes)
    fail(ErrorCode::InvalidArgument,
         "rank {}: post_send of {} bytes to rank {}: at most {} bytes per message", rank_, payload.size(),
         peer, kMaxPayloadBytes);
  SendOp op;
  op.id = next_id_++;
  op.header =
      encode_frame(FrameHeader{.envelope = envelope, .payload_bytes = payload.size()});
  op.payload = payload;
  peers_[peer].sends.push_back(op);
  return op.id;
}

OpId TcpSocketTransport::post_recv(int peer, const Envelope& envelope, std::span<std::byte> destination) {
  check_postable(peer, "post_recv");
  RecvOp op{.id = next_id_++, .envelope = envelope, .destination = destination};
  peers_[peer].recvs.push_back(op);
  return op.id;
}

void TcpSocketTransport::fail_peer(int peer, ErrorCode code, const std::string& what) {
  Peer& p = peers_[peer];
  p.failure = Error(code, what);
  p.sends.clear();
  p.recvs.clear();
  // shutdown, not close: the descriptor number stays ours, so abort() on another thread can never hit a
  // reused one.
  ::shutdown(p.link.fd.get(), SHUT_RDWR);
  log::debug("{}", what);  // the caller gets it as an exception: no second report on stderr
  throw *p.failure;
}

void TcpSocketTransport::fail_io(int peer, int error, const char* direction) {
  // abort() shut the sockets down under us: report the abort, not its echo.
  abort_.throw_if_raised(rank_);
  const Peer& p = peers_[peer];
  std::size_t pending = p.sends.size() + p.recvs.size();
  std::string cause = error == 0 ? std::string("the peer closed it (end of stream)") : std::strerror(error);
  const std::string what =
      fmt::format("rank {}: connection to rank {} ({}) closed: {}, while {}; {} operation(s) to/from rank {} "
                  "failed (did rank {} exit or crash?)",
                  rank_, peer, p.link.address, cause, direction, pending, peer, peer);
  try {
    fail_peer(peer, ErrorCode::PeerFailed, what);
  } catch (const Error&) {
    throw PeerFailedError(peer, what);  // the first report says which peer; later posts rethrow the Error
  }
}

bool TcpSocketTransport::drive_sends(int peer, std::vector<OpId>& completed, std::uint64_t budget) {
  Peer& p = peers_[peer];
  std::uint64_t moved = 0;
  while (!p.sends.empty()) {
    if (moved >= budget) return true;
    SendOp& op = p.sends.front();
    const std::uint64_t total = kFrameHeaderSize + op.payload.size();
    iovec iov[2];
    int parts = 0;
    std::uint64_t payload_offset = 0;
    if (op.sent < kFrameHeaderSize) {
      iov[parts++] = {op.header.data() + op.sent, kFrameHeaderSize - op.sent};
    } else {
      payload_offset = op.sent - kFrameHeaderSize;
    }
    if (payload_offset < op.payload.size()) {
      auto chunk = std::min({op.payload.size() - payload_offset, kMaxBytesPerCall, budget - moved});
      iov[parts++] = {const_cast<std::byte*>(op.payload.data() + payload_offset), chunk};
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = static_cast<std::size_t>(parts);
    ssize_t n = ::sendmsg(p.link.fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (would_block(errno)) return false;
      if (errno == EINTR) continue;
      fail_io(peer, errno, "sending");
    }
    op.sent += static_cast<std::uint64_t>(n);
    moved += static_cast<std::uint64_t>(n);
    bytes_moved_ += static_cast<std::uint64_t>(n);
    if (op.sent == total) {
      completed.push_back(op.id);
      p.sends.pop_front();
    }
  }
  return false;
}

std::size_t TcpSocketTransport::take_from_inbox(Peer& p, std::byte* out, std::size_t wanted) {
  std::size_t n = std::min(wanted, p.inbox_end - p.inbox_begin);
  if (n == 0) return 0;
  std::memcpy(out, p.inbox.data() + p.inbox_begin, n);
  p.inbox_begin += n;
  if (p.inbox_begin == p.inbox_end) p.inbox_begin = p.inbox_end = 0;
  return n;
}

bool TcpSocketTransport::refill_inbox(int peer) {
  Peer& p = peers_[peer];
  for (;;) {
    ssize_t n = ::recv(p.link.fd.get(), p.inbox.data(), p.inbox.size(), MSG_DONTWAIT);
    if (n > 0) {
      p.inbox_begin = 0;
      p.inbox_end = static_cast<std::size_t>(n);
      bytes_moved_ += static_cast<std::uint64_t>(n);
      return true;
    }
    if (n == 0) fail_io(peer, 0, "receiving");
    if (would_block(errno)) return false;
    if (errno != EINTR) fail_io(peer, errno, "receiving");
  }
}

bool TcpSocketTransport::drive_recvs(int peer, std::vector<OpId>& completed, std::uint64_t budget) {
  Peer& p = peers_[peer];
  std::uint64_t moved = 0;
  while (!p.recvs.empty()) {
    RecvOp& op = p.recvs.front();
    // The header first: no payload byte may reach the destination before it is checked.
    while (p.header_received < kFrameHeaderSize) {
      p.header_received +=
          take_from_inbox(p, p.header_in.data() + p.header_received, kFrameHeaderSize - p.header_received);
      if (p.header_received < kFrameHeaderSize && !refill_inbox(peer)) return false;
    }
    if (!p.header_checked) {
      try {
        FrameHeader header = decode_frame(p.header_in);
        check_frame(header, op.envelope, op.destination.size(), rank_, peer);
        if (header.payload_bytes > 0) arrived_flags_ |= header.envelope.flags;
      } catch (const Error& e) {
        // The stream is out of step with what this rank expects: nothing more can be read from it.
        fail_peer(peer, e.code(),
                  e.code() == ErrorCode::Protocol
                      ? fmt::format("rank {}: from rank {} ({}): {}", rank_, peer, p.link.address, e.what())
                      : std::string(e.what()));
      }
      p.header_checked = true;
    }
    const std::uint64_t size = op.destination.size();
    p.payload_received +=
        take_from_inbox(p, op.destination.data() + p.payload_received, size - p.payload_received);
    while (p.payload_received < size) {
      const std::uint64_t left = size - p.payload_received;
      if (left < p.inbox.size()) {
        // A small remainder: read ahead into the inbox, the next frames may come with it.
        if (!refill_inbox(peer)) return false;
        p.payload_received += take_from_inbox(p, op.destination.data() + p.payload_received, left);
        continue;
      }
      // Straight into the destination, exactly the bytes of this frame.
      if (moved >= budget) return true;
      ssize_t n = ::recv(p.link.fd.get(), op.destination.data() + p.payload_received,
                         std::min({left, kMaxBytesPerCall, budget - moved}), MSG_DONTWAIT);
      if (n > 0) {
        p.payload_received += static_cast<std::uint64_t>(n);
        moved += static_cast<std::uint64_t>(n);
        bytes_moved_ += static_cast<std::uint64_t>(n);
      } else if (n == 0) {
        fail_io(peer, 0, "receiving");
      } else if (would_block(errno)) {
        return false;
      } else if (errno != EINTR) {
        fail_io(peer, errno, "receiving");
      }
    }
    completed.push_back(op.id);
    p.recvs.pop_front();
    p.header_received = 0;
    p.header_checked = false;
    p.payload_received = 0;
  }
  return false;
}

void TcpSocketTransport::drive(int peer, std::vector<OpId>& completed, bool try_reading) {
  const Peer& p = peers_[peer];
  for (;;) {
    // Both directions busy: alternate in slices, so that neither side's socket buffers fill up while this
    // thread is busy copying the other way (one thread per process drives both directions).
    const bool duplex = try_reading && !p.sends.empty() && !p.recvs.empty();
    const std::uint64_t budget = duplex ? kDuplexSlice : ~std::uint64_t{0};
    bool more = false;
    if (!p.sends.empty()) more |= drive_sends(peer, completed, budget);
    if (!p.recvs.empty() && try_reading) more |= drive_recvs(peer, completed, budget);
    if (!more) return;
  }
}

// The spin ends once the sockets have been idle for spin_: while a large message streams in, it keeps
// draining the socket instead of sleeping between the sender's bursts. Each round offers the core to any
// other runnable process (sched_yield): the peer we wait for may be queued behind us, and a busy
// machine's other work must not starve while we only wait.
bool TcpSocketTransport::spin(Deadline deadline, std::vector<OpId>& completed) {
  const std::size_t completed_before = completed.size();
  Deadline until = Deadline::after(spin_).earlier(deadline);
  std::uint64_t moved_before = bytes_moved_;
  while (!until.expired() && !abort_.raised()) {
    for (int peer = 0; peer < size_; ++peer)
      if (peers_[peer].busy()) drive(peer, completed, true);
    if (completed.size() > completed_before) return true;
    if (bytes_moved_ != moved_before) {
      moved_before = bytes_moved_;
      until = Deadline::after(spin_).earlier(deadline);
    }
    ::sched_yield();
  }
  return false;
}

bool TcpSocketTransport::progress(Deadline deadline, std::vector<OpId>& completed) {
  const std::size_t completed_before = completed.size();
  bool first_pass = true;
  for (;;) {
    abort_.throw_if_raised(rank_);
    if (first_pass) {
      // Sends are tried at once: the socket buffer usually has room. Reads only where bytes are already
      // buffered: otherwise poll() says when data is there, and a recv() that finds nothing is saved (it
      // would cost a syscall on every small-message round trip).
      for (int peer = 0; peer < size_; ++peer) {
        const Peer& p = peers_[peer];
        if (p.busy()) drive(peer, completed, p.inbox_end > p.inbox_begin);
      }
      first_pass = false;
    } else {
      for (std::size_t i = 0; i < poll_peers_.size(); ++i)
        if (poll_fds_[i + 1].revents != 0) drive(poll_peers_[i], completed, true);
    }
    if (completed.size() > completed_before) return true;
    if (deadline.expired()) return false;
    if (spin_.count() > 0 && spin_backoff_.should_spin()) {
      const bool completed_while_spinning = spin(deadline, completed);
      spin_backoff_.record(completed_while_spinning);
      if (completed_while_spinning) return true;
    }

    poll_fds_.clear();
    poll_peers_.clear();
    poll_fds_.push_back({wake_fd_.get(), POLLIN, 0});
    for (int peer = 0; peer < size_; ++peer) {
      const Peer& p = peers_[peer];
      if (!p.busy()) continue;
      short events = static_cast<short>((p.sends.empty() ? 0 : POLLOUT) | (p.recvs.empty() ? 0 : POLLIN));
      poll_fds_.push_back({p.link.fd.get(), events, 0});
      poll_peers_.push_back(peer);
    }
    if (poll_peers_.empty() && deadline.is_never())
      fail(ErrorCode::InvalidArgument,
           "rank {}: progress() without a deadline while no operation is pending would wait forever", rank_);
    int ready = ::poll(poll_fds_.data(), poll_fds_.size(), deadline.poll_timeout_ms());
    if (ready < 0) {
      if (errno == EINTR) {
        for (auto& fd : poll_fds_) fd.revents = 0;
        continue;
      }
      fail_errno(fmt::format("rank {}: poll", rank_));
    }
    if (poll_fds_[0].revents != 0 && !abort_.raised()) {
      // wake(): the caller has new work for this thread.
      std::uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(wake_fd_.get(), &count, sizeof(count));
      return completed.size() > completed_before;
    }
  }
}

void TcpSocketTransport::abort(const std::string& reason) {
  if (!abort_.raise(reason)) return;
  // Peers blocked on us learn at once that nothing more will come.
  for (const Peer& p : peers_)
    if (p.link.fd.valid()) ::shutdown(p.link.fd.get(), SHUT_RDWR);
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof(one));
}

void TcpSocketTransport::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof(one));
}

}  // namespace canopy::transport
