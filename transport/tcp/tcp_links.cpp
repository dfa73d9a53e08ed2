#include "transport/tcp/tcp_links.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

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

// While a peer is sent to and received from at once, each direction moves this much before the other's turn.
constexpr std::uint64_t kDuplexSlice = std::uint64_t{1} << 20;
// Read-ahead per peer: many small frames per recv(); payloads at least this large skip it.
constexpr std::size_t kInboxBytes = 64 * 1024;

}  // namespace

TcpLinks::TcpLinks(int rank, int size, TcpLinkSet links, const AbortFlag& abort)
    : rank_(rank),
      abort_(abort),
      peers_(static_cast<std::size_t>(size)),
      connector_(std::move(links.connector)) {
  for (std::size_t p = 0; p < links.links.size(); ++p)
    if (links.links[p].fd.valid()) install(static_cast<int>(p), std::move(links.links[p]));
}

void TcpLinks::install(int peer, PeerLink link) {
  Peer& p = peers_[peer];
  p.inbox.resize(kInboxBytes);  // only now: a group of thousands holds few links
  std::lock_guard lock(links_mutex_);
  p.link = std::move(link);
  if (shut_) ::shutdown(p.link.fd.get(), SHUT_RDWR);
}

int TcpLinks::connected_peers() const {
  std::lock_guard lock(links_mutex_);
  return static_cast<int>(
      std::count_if(peers_.begin(), peers_.end(), [](const Peer& p) { return p.link.fd.valid(); }));
}

void TcpLinks::expect_peers(std::span<const int> peers) {
  if (!connector_) return;
  std::vector<int> unlinked;
  for (int peer : peers)
    if (!peers_[peer].link.fd.valid() && !connector_->requested(peer)) unlinked.push_back(peer);
  connector_->expect(unlinked);
}

void TcpLinks::ensure_link(int peer) {
  if (!connector_ || peers_[peer].link.fd.valid() || connector_->requested(peer)) return;
  try {
    connector_->request(peer);
  } catch (const Error& e) {
    fail_peer(peer, e.code(), e.what());
  }
}

void TcpLinks::take_connections(Completions& done) {
  outcomes_.clear();
  connector_->drive(outcomes_);
  const TcpConnector::Outcome* failed = nullptr;
  for (auto& outcome : outcomes_) {
    if (outcome.failure)
      failed = &outcome;
    else
      install(outcome.peer, std::move(outcome.link));
  }
  if (failed) fail_peer(failed->peer, failed->failure->code(), failed->failure->what());
  // What waited for these links moves now, whatever the pass.
  for (const auto& outcome : outcomes_)
    if (peers_[outcome.peer].busy()) drive(outcome.peer, done, true);
}

void TcpLinks::post_send(OpId id, int peer, const Envelope& envelope, std::span<const std::byte> payload) {
  Peer& p = peers_[peer];
  if (p.failure) throw *p.failure;
  ensure_link(peer);
  SendOp op;
  op.id = id;
  op.header = encode_frame(FrameHeader{.envelope = envelope, .payload_bytes = payload.size()});
  op.payload = payload;
  p.sends.push_back(op);
}

void TcpLinks::post_recv(OpId id, int peer, const Envelope& envelope, std::span<std::byte> destination) {
  Peer& p = peers_[peer];
  if (p.failure) throw *p.failure;
  ensure_link(peer);
  p.recvs.push_back(RecvOp{.id = id, .envelope = envelope, .destination = destination});
}

bool TcpLinks::busy() const {
  return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.busy(); });
}

void TcpLinks::fail_peer(int peer, ErrorCode code, const std::string& what) {
  Peer& p = peers_[peer];
  p.failure = Error(code, what);
  p.sends.clear();
  p.recvs.clear();
  // A broken stream is shut down at once (shutdown, not close: the descriptor number stays ours, so abort()
  // on another thread can never hit a reused one). One out of step (a mismatch, a malformed frame) stays
  // open until abort(): the communicator first records why for the other ranks, so the peer blames the
  // mismatch, not the closed connection.
  if (code == ErrorCode::PeerFailed && p.link.fd.valid()) ::shutdown(p.link.fd.get(), SHUT_RDWR);
  log::debug("{}", what);  // the caller gets it as an exception: no second report on stderr
  throw *p.failure;
}

void TcpLinks::fail_io(int peer, int error, const char* direction) {
  // abort() shut the sockets down under us: report the abort, not its echo.
  abort_.throw_if_raised(rank_);
  const Peer& p = peers_[peer];
  std::size_t pending = p.sends.size() + p.recvs.size();
  std::string cause = error == 0 ? std::string("the peer closed it (end of stream)") : std::strerror(error);
  const std::string what = fmt::format(
      "rank {}: connection to rank {} ({}) closed: {}, while {}; {} operation(s) to/from rank {} "
      "failed (did rank {} exit or crash?)",
      rank_, peer, p.link.address, cause, direction, pending, peer, peer);
  try {
    fail_peer(peer, ErrorCode::PeerFailed, what);
  } catch (const Error&) {
    throw PeerFailedError(peer, what);  // the first report says which peer; later posts rethrow the Error
  }
}

bool TcpLinks::drive_sends(int peer, Completions& done, std::uint64_t budget) {
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
      done.ids.push_back(op.id);
      p.sends.pop_front();
    }
  }
  return false;
}

std::size_t TcpLinks::take_from_inbox(Peer& p, std::byte* out, std::size_t wanted) {
  std::size_t n = std::min(wanted, p.inbox_end - p.inbox_begin);
  if (n == 0) return 0;
  std::memcpy(out, p.inbox.data() + p.inbox_begin, n);
  p.inbox_begin += n;
  if (p.inbox_begin == p.inbox_end) p.inbox_begin = p.inbox_end = 0;
  return n;
}

bool TcpLinks::refill_inbox(int peer) {
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

bool TcpLinks::drive_recvs(int peer, Completions& done, std::uint64_t budget) {
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
        if (header.payload_bytes > 0) done.arrived_flags |= header.envelope.flags;
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
    done.ids.push_back(op.id);
    p.recvs.pop_front();
    p.header_received = 0;
    p.header_checked = false;
    p.payload_received = 0;
  }
  return false;
}

void TcpLinks::drive(int peer, Completions& done, bool try_reading) {
  const Peer& p = peers_[peer];
  for (;;) {
    // Both directions busy: alternate in slices, so that neither side's socket buffers fill up while this
    // thread is busy copying the other way (one thread per process drives both directions).
    const bool duplex = try_reading && !p.sends.empty() && !p.recvs.empty();
    const std::uint64_t budget = duplex ? kDuplexSlice : ~std::uint64_t{0};
    bool more = false;
    if (!p.sends.empty()) more |= drive_sends(peer, done, budget);
    if (!p.recvs.empty() && try_reading) more |= drive_recvs(peer, done, budget);
    if (!more) return;
  }
}

void TcpLinks::drive(Pass pass, Completions& done) {
  if (connector_) take_connections(done);
  switch (pass) {
    case Pass::First:
      // Sends are tried at once: the socket buffer usually has room. Reads only where bytes are already
      // buffered: otherwise poll() says when data is there, and a recv() that finds nothing is saved (it
      // would cost a syscall on every small-message round trip).
      for (std::size_t peer = 0; peer < peers_.size(); ++peer) {
        const Peer& p = peers_[peer];
        if (p.busy() && p.link.fd.valid()) drive(static_cast<int>(peer), done, p.inbox_end > p.inbox_begin);
      }
      return;
    case Pass::Spin:
      for (std::size_t peer = 0; peer < peers_.size(); ++peer)
        if (peers_[peer].busy() && peers_[peer].link.fd.valid()) drive(static_cast<int>(peer), done, true);
      return;
    case Pass::Polled:
      for (std::size_t i = 0; i < poll_peers_.size(); ++i)
        if (polled_[i] != 0) drive(poll_peers_[i], done, true);
      return;
  }
}

bool TcpLinks::prepare_to_block(std::vector<pollfd>& fds) {
  poll_peers_.clear();
  for (std::size_t peer = 0; peer < peers_.size(); ++peer) {
    const Peer& p = peers_[peer];
    if (!p.busy() || !p.link.fd.valid()) continue;
    short events = static_cast<short>((p.sends.empty() ? 0 : POLLOUT) | (p.recvs.empty() ? 0 : POLLIN));
    fds.push_back({p.link.fd.get(), events, 0});
    poll_peers_.push_back(static_cast<int>(peer));
  }
  polled_.assign(poll_peers_.size(), 0);
  wake_by_ = Clock::time_point::max();
  const std::size_t before = fds.size();
  if (connector_) connector_->prepare_to_block(fds, wake_by_);
  connector_polls_ = fds.size() - before;
  return true;
}

void TcpLinks::after_poll(std::span<const pollfd> fds) {
  for (std::size_t i = 0; i < fds.size() && i < polled_.size(); ++i) polled_[i] = fds[i].revents;
  if (connector_ && fds.size() >= polled_.size() + connector_polls_)
    connector_->after_poll(fds.subspan(polled_.size(), connector_polls_));
}

void TcpLinks::shut_down() {
  std::lock_guard lock(links_mutex_);
  shut_ = true;
  for (const Peer& p : peers_)
    if (p.link.fd.valid()) ::shutdown(p.link.fd.get(), SHUT_RDWR);
}

}  // namespace canopy::transport
