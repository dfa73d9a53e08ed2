// The data path of the TCP transport over an established mesh: one non-blocking socket per peer,
// driven by poll() on the calling thread inside progress(). See docs/TRANSPORT.md for why not Asio.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "canopy/error.hpp"
#include "transport/frame.hpp"
#include "transport/tcp/ring_queue.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/spin_rule.hpp"
#include "transport/abort_flag.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

// One connected socket per peer; links[rank] is unused.
struct PeerLink {
  UniqueFd fd;
  std::string address;  // the peer's "ip:port", for messages
};

class TcpSocketTransport final : public Transport {
 public:
  // `spin`: how long progress() busy-polls idle sockets before it blocks in poll() (0: never spins);
  // see spin_rule.hpp for the default.
  TcpSocketTransport(int rank, int size, std::vector<PeerLink> links,
                     std::chrono::microseconds spin = std::chrono::microseconds(0));
  ~TcpSocketTransport() override;
  TcpSocketTransport(const TcpSocketTransport&) = delete;
  TcpSocketTransport& operator=(const TcpSocketTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "tcp"; }
  OpId post_send(int peer, const Envelope& envelope, std::span<const std::byte> payload) override;
  OpId post_recv(int peer, const Envelope& envelope, std::span<std::byte> destination) override;
  bool progress(Deadline deadline, std::vector<OpId>& completed) override;
  void abort(const std::string& reason) override;
  void wake() override;
  bool carries_flags() const override { return true; }
  std::uint8_t take_arrived_flags() override { return std::exchange(arrived_flags_, 0); }

 private:
  struct SendOp {
    OpId id = 0;
    FrameBytes header{};
    std::span<const std::byte> payload;
    std::uint64_t sent = 0;  // of header and payload together
  };
  struct RecvOp {
    OpId id = 0;
    Envelope envelope;
    std::span<std::byte> destination;
  };
  struct Peer {
    PeerLink link;
    RingQueue<SendOp> sends;
    RingQueue<RecvOp> recvs;
    // Bytes read ahead of the frame being parsed: one recv() brings a small message's header and payload
    // (and often the next ones) at once. Large payloads bypass it and land straight in the destination.
    std::vector<std::byte> inbox;
    std::size_t inbox_begin = 0;
    std::size_t inbox_end = 0;
    // The frame arriving for recvs.front().
    FrameBytes header_in{};
    std::size_t header_received = 0;
    bool header_checked = false;
    std::uint64_t payload_received = 0;
    std::optional<Error> failure;  // set once: every later operation toward this peer fails with it
    bool busy() const { return !sends.empty() || !recvs.empty(); }
  };

  void check_postable(int peer, const char* call) const;
  void drive(int peer, std::vector<OpId>& completed, bool try_reading);
  // Each moves at most `budget` bytes; true when it stopped for the budget (more could move now).
  bool drive_sends(int peer, std::vector<OpId>& completed, std::uint64_t budget);
  bool drive_recvs(int peer, std::vector<OpId>& completed, std::uint64_t budget);
  // Moves buffered bytes into `out`; returns how many.
  std::size_t take_from_inbox(Peer& p, std::byte* out, std::size_t wanted);
  // One recv() into the empty inbox; false when the socket had nothing.
  bool refill_inbox(int peer);
  [[noreturn]] void fail_peer(int peer, ErrorCode code, const std::string& what);
  [[noreturn]] void fail_io(int peer, int error, const char* direction);
  // Busy-polls every busy peer for up to spin_ (bounded by the deadline); true once something completed.
  bool spin(Deadline deadline, std::vector<OpId>& completed);

  const int rank_;
  const int size_;
  const std::chrono::microseconds spin_;
  SpinBackoff spin_backoff_;
  std::vector<Peer> peers_;
  std::vector<pollfd> poll_fds_;  // reused by every progress() call
  std::vector<int> poll_peers_;
  UniqueFd wake_fd_;  // eventfd written by abort()
  OpId next_id_ = 1;
  std::uint64_t bytes_moved_ = 0;  // by every socket call so far: tells a spin that data is still flowing

  std::uint8_t arrived_flags_ = 0;  // ORed from frames with a payload, until take_arrived_flags()
  AbortFlag abort_;
};

}  // namespace canopy::transport
