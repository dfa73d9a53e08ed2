// The shared-memory data path between the ranks of one host: for each direction that carries a message, a
// ring (shm_ring.hpp) made by the sender on its first message and handed to the receiver over the pair's
// Unix socket, which also says at once when the peer is gone. A message goes in its cell (up to
// kInlineBytes), through the ring's bytes, or, from CANOPY_SHM_SINGLE_COPY_BYTES up where the kernel lets
// the receiver read the sender's memory, straight from the sender's buffer into the receiver's
// (process_vm_readv: one copy instead of two; the send completes once the receiver has read it). Driven by
// the mesh's progress() (mesh_transport.hpp) like the TCP links, and waited for in the same poll(): this
// rank's doorbell (an eventfd its peers write when it sleeps) and every peer's socket.
//
// A direction whose ring cannot be made (the host's budget spent, memory short, a mapping refused) is
// handed, with what is pending in it, to the fallback links (TCP) before its first message: the messages of
// one direction always travel one way, in order.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "transport/frame.hpp"
#include "transport/io_part.hpp"
#include "transport/shm/shm_dialer.hpp"
#include "transport/shm/shm_options.hpp"
#include "transport/shm/shm_ring.hpp"
#include "transport/tcp/ring_queue.hpp"
#include "transport/tcp/socket.hpp"

namespace canopy::transport {

class ShmLinks final : public IoPart {
 public:
  // Hands the sends to (receives from) `peer` to the fallback links: the mesh routes them there from now
  // on. Called before the direction's first message.
  using Reroute = std::function<void(int peer, bool sends)>;

  // `dialer` (shm_dialer.hpp) makes the links of the peers not reached in `peers` when a message first needs
  // them; null: every link was made.
  ShmLinks(int rank, std::vector<ShmPeerLink> peers, UniqueFd doorbell, const ShmOptions& options,
           int host_ranks, const AbortFlag& abort, IoPart& fallback, Reroute reroute,
           std::unique_ptr<ShmDialer> dialer = nullptr);
  ~ShmLinks() override;

  void post_send(OpId id, int peer, const Envelope& envelope, std::span<const std::byte> payload) override;
  void post_recv(OpId id, int peer, const Envelope& envelope, std::span<std::byte> destination) override;
  bool receives_in_place(int peer) const override;
  void post_recv_in_place(OpId id, int peer, const Envelope& envelope, std::uint64_t bytes,
                          PieceSink& sink) override;
  bool busy() const override;
  void drive(Pass pass, Completions& done) override;
  std::uint64_t bytes_moved() const override { return bytes_moved_; }
  bool prepare_to_block(std::vector<pollfd>& fds) override;
  void after_poll(std::span<const pollfd> fds) override;
  Clock::time_point wake_by() const override { return wake_by_; }
  void shut_down() override;

 private:
  enum class Way { None, Offered, Ring, Fallback };  // a direction: no ring yet, offered, in use, on TCP
  struct SendOp {
    OpId id = 0;
    Envelope envelope;
    std::span<const std::byte> payload;
    bool header_written = false;
    std::uint64_t written = 0;  // payload bytes, into the ring
  };
  // A single-copy send: done once the receiver has read this many single-copy payloads.
  struct CopyWait {
    OpId id = 0;
    std::uint64_t copies = 0;
  };
  struct RecvOp {
    OpId id = 0;
    Envelope envelope;
    std::byte* destination = nullptr;  // or, when null, `sink`
    PieceSink* sink = nullptr;
    std::uint64_t bytes = 0;
    bool header_checked = false;
    CellBody body = CellBody::Inline;
    std::uint64_t source = 0;  // a single-copy payload's address in the sender
    std::uint64_t received = 0;
  };
  struct Peer {
    ShmPeerLink link;
    pid_t process = 0;  // as this process's namespace sees it (SO_PEERCRED); 0: not known
    Way out = Way::None;
    Way in = Way::None;
    std::optional<RingProducer> sending;
    std::optional<RingConsumer> receiving;
    std::uint64_t reserved = 0;  // of the budget, for `sending`
    // What the receiver reads to prove that it can read this process's memory (the ring's nonce).
    std::unique_ptr<std::uint64_t> probe;
    bool single_copy_out = false;  // the peer reads large sends from this process's buffers
    bool single_copy_in = false;   // this rank reads large messages from the peer's buffers
    std::uint64_t copies_posted = 0;
    RingQueue<SendOp> sends;
    RingQueue<CopyWait> copying;
    RingQueue<RecvOp> recvs;
    bool socket_ready = false;  // the last poll() said the socket has something
    bool closed = false;        // its socket reached the end of the stream
    std::optional<Error> failure;
    bool busy() const { return !sends.empty() || !copying.empty() || !recvs.empty(); }
    bool reached() const { return link.socket.valid(); }
  };

  void check_postable(const Peer& p) const;
  // Connections on first use (shm_links_first_use.cpp): asks the dialer for the peer's link, and installs
  // what it made (what waited for a link moves in the drive that follows).
  void ensure_link(int peer);
  void take_links();
  void install(int peer, ShmPeerLink link);
  void drive_peer(int peer, Completions& done);
  // What arrived on the peer's socket: offers, answers, fallbacks, or its end.
  void read_socket(int peer);
  void handle_packet(int peer, std::span<const std::byte> packet, UniqueFd passed);
  void offer_ring(int peer);
  void accept_ring(int peer, std::uint64_t capacity, std::uint64_t nonce, std::uint64_t probe_address,
                   UniqueFd passed);
  void fall_back(int peer, bool sends, const std::string& why);
  void write_frames(int peer, Completions& done);
  // Writes the op's next payload piece into the ring; false when there is no room.
  bool write_piece(RingProducer& ring, SendOp& op);
  void finish_copies(Peer& p, Completions& done);
  void read_frames(int peer, Completions& done);
  // Takes the cell the op's message starts with: checks its header; true when it held the whole payload
  // (then delivered, and the op done).
  bool take_cell(int peer, RecvOp& op, const std::byte* cell, CellBody body, Completions& done);
  // Whether a cell's body suits a payload of `bytes` (`word`: the body's tail or address).
  static bool body_fits(Peer& p, CellBody body, std::uint64_t bytes, std::uint64_t word);
  void deliver(RecvOp& op, std::uint64_t offset, std::span<const std::byte> piece);
  void read_ring_payload(Peer& p, RecvOp& op);
  // Copies the op's next piece straight from the sender's buffer (single copy).
  void copy_piece(int peer, RecvOp& op);
  bool peer_gone(const Peer& p) const;
  // Whether this rank waits on what the peer does to the rings between them (data or a cell from it; room,
  // a cell or a finished copy toward it), and whether that came already (checked after announcing a sleep).
  static bool awaits_ring_in(const Peer& p);
  static bool awaits_ring_out(const Peer& p);
  static bool can_move_in(Peer& p);
  static bool can_move_out(Peer& p);
  bool probe_single_copy(const Peer& p, std::uint64_t address, std::uint64_t expected) const;
  void ring_doorbell(int peer);
  void send_control(int peer, char kind, std::uint64_t a = 0, std::uint64_t b = 0, std::uint64_t c = 0,
                    int pass = -1, const std::string& text = {});
  [[noreturn]] void fail_peer(int peer, ErrorCode code, const std::string& what);
  [[noreturn]] void fail_closed(int peer, const char* direction);

  const int rank_;
  const ShmOptions options_;
  const int host_ranks_;
  const AbortFlag& abort_;
  IoPart& fallback_;
  Reroute reroute_;
  std::vector<Peer> peers_;
  UniqueFd doorbell_;              // this rank's: peers write it when this rank sleeps on a ring they share
  std::vector<int> poll_peers_;    // whose sockets prepare_to_block() asked to wait on, after the doorbell
  std::vector<int> sleeping_;      // peers whose rings carry this rank's announced sleep
  std::vector<std::byte> bounce_;  // where a single-copy payload lands for an in-place receive
  std::unique_ptr<ShmDialer> dialer_;
  std::vector<ShmDialer::Outcome> outcomes_;
  // Guards the peers' links between install() and shut_down(), which any thread may call.
  mutable std::mutex links_mutex_;
  bool shut_ = false;
  std::size_t dialer_polls_ = 0;  // its entries, last in the last prepare_to_block()
  Clock::time_point wake_by_ = Clock::time_point::max();
  std::uint64_t bytes_moved_ = 0;
};

}  // namespace canopy::transport
