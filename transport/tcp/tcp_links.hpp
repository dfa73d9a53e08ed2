// The data path of the TCP transport over an established mesh: one non-blocking socket per peer, driven by
// the mesh's progress() (mesh_transport.hpp) on the calling thread. See docs/TRANSPORT.md for why not Asio.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "canopy/error.hpp"
#include "transport/frame.hpp"
#include "transport/io_part.hpp"
#include "transport/tcp/ring_queue.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_connector.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {

// The connections of connect_tcp_mesh() without a transport over them yet: for a mesh that carries some
// peers another way (shared memory) and the rest over these. Every link is made now, or (with
// `options.store_for_first_use`) none: a connector makes each when a message first needs it. `only`: made now
// with these peers only (the same-host peers, where TCP is only the rings' fallback); both ranks of a pair
// must agree.
struct TcpLinkSet {
  std::vector<PeerLink> links;              // by rank; empty when connecting on first use
  std::unique_ptr<TcpConnector> connector;  // null when every link was made
};
TcpLinkSet form_tcp_links(Store& store, int rank, int size, const TcpOptions& options,
                          const std::vector<int>* only = nullptr);

// How long a mesh over these links busy-polls before it blocks: TcpOptions::spin, else choose_spin() from
// the host's ranks and cores.
std::chrono::microseconds chosen_spin(const TcpOptions& options, int size);

class TcpLinks final : public IoPart {
 public:
  // `abort` is the mesh's: a socket that fails after abort() shut it reports the abort. A message to or
  // from a peer without a link asks the set's connector for one, and waits in its queue until it is up.
  TcpLinks(int rank, int size, TcpLinkSet links, const AbortFlag& abort);

  void post_send(OpId id, int peer, const Envelope& envelope, std::span<const std::byte> payload) override;
  void post_recv(OpId id, int peer, const Envelope& envelope, std::span<std::byte> destination) override;
  void expect_peers(std::span<const int> peers) override;
  bool busy() const override;
  void drive(Pass pass, Completions& done) override;
  std::uint64_t bytes_moved() const override { return bytes_moved_; }
  bool prepare_to_block(std::vector<pollfd>& fds) override;
  Clock::time_point wake_by() const override { return wake_by_; }
  void after_poll(std::span<const pollfd> fds) override;
  void shut_down() override;
  // The peers this rank holds a connection with now.
  int connected_peers() const;

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

  void install(int peer, PeerLink link);
  // A message to or from a peer without a link: ask for one (connections on first use).
  void ensure_link(int peer);
  // Installs what the connector finished and drives what waited for it; a dial that failed fails its
  // peer's operations.
  void take_connections(Completions& done);
  void drive(int peer, Completions& done, bool try_reading);
  // Each moves at most `budget` bytes; true when it stopped for the budget (more could move now).
  bool drive_sends(int peer, Completions& done, std::uint64_t budget);
  bool drive_recvs(int peer, Completions& done, std::uint64_t budget);
  // Moves buffered bytes into `out`; returns how many.
  std::size_t take_from_inbox(Peer& p, std::byte* out, std::size_t wanted);
  // One recv() into the empty inbox; false when the socket had nothing.
  bool refill_inbox(int peer);
  [[noreturn]] void fail_peer(int peer, ErrorCode code, const std::string& what);
  [[noreturn]] void fail_io(int peer, int error, const char* direction);

  const int rank_;
  const AbortFlag& abort_;
  std::vector<Peer> peers_;
  std::unique_ptr<TcpConnector> connector_;  // null when every link was made up front
  std::vector<TcpConnector::Outcome> outcomes_;
  // Guards the peers' descriptors between install() and shut_down(), which any thread may call.
  mutable std::mutex links_mutex_;
  bool shut_ = false;
  std::vector<int> poll_peers_;      // the peers prepare_to_block() asked to wait on, in order
  std::size_t connector_polls_ = 0;  // the connector's entries after them
  Clock::time_point wake_by_ = Clock::time_point::max();
  std::vector<short> polled_;      // their revents from the last poll()
  std::uint64_t bytes_moved_ = 0;  // by every socket call so far: tells a spin that data is still flowing
};

}  // namespace canopy::transport
