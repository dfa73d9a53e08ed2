// Makes a group's TCP connections without ever blocking: all of them while the mesh forms
// (CANOPY_CONNECT=eager), or each when a message first needs it (connections on first use).
//
// The higher rank of a pair always dials the lower one, which only accepts. So the two ranks of a pair
// never open it twice, and neither needs to ask the other (or the store) who goes first: a lower rank
// with a message for a higher one just waits, because the higher rank posts the matching receive and
// dials then. Dials and inbound handshakes are state machines moved by drive(), from the mesh's poll
// loop, so one slow peer holds up nobody else.
#pragma once

#include <poll.h>

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "transport/tcp/handshake.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_listener.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {

// One connected socket per peer; links[rank] is unused.
struct PeerLink {
  UniqueFd fd;
  std::string address;  // the peer's "ip:port", for messages
};

class TcpConnector {
 public:
  // What drive() finished: a connection with `peer`, or why there will be none.
  struct Outcome {
    int peer = -1;
    PeerLink link;
    std::optional<Error> failure;
  };

  // Listens and publishes "tcp/<comm_id>/addr/<rank>" in the store (one request). Dials read the lower
  // peers' addresses from the store when they start, once each: the connector keeps it. With an address
  // book (options.address_book) the listener, shared with the communicator's other meshes, and the
  // addresses are the book's (no request here), and the dials that start together read their peers'
  // records in one request.
  TcpConnector(std::shared_ptr<Store> store, int rank, int size, const TcpOptions& options);
  ~TcpConnector();
  TcpConnector(const TcpConnector&) = delete;
  TcpConnector& operator=(const TcpConnector&) = delete;

  // Asks for the connection with `peer` (once; later calls do nothing): a lower peer is dialled, a higher
  // one is awaited on the listener. A dial that has not succeeded within the connect timeout ends in a
  // Timeout outcome; an awaited peer is bounded by the caller's own deadline.
  void request(int peer);
  bool requested(int peer) const { return requested_[static_cast<std::size_t>(peer)]; }
  // The peers that are about to be asked for (Transport::expect_peers): with an address book, the records
  // of those this rank will dial are read now, all in one store request. Asks for nothing; never throws.
  void expect(const std::vector<int>& peers);
  // Whether a dial is under way: drive() has work even without a poll.
  bool dialling() const { return !dials_.empty(); }
  // The awaited peers that have not connected yet, in rank order.
  std::vector<int> awaited() const;
  // The listening address, for messages.
  std::string address() const { return address_; }

  // Moves every handshake as far as it goes without blocking; appends what finished to `outcomes`. A
  // higher peer that connects before this rank asked for it is handed out too: its message is on the way.
  void drive(std::vector<Outcome>& outcomes);
  // The descriptors to wait on (the listener, every handshake), and the time by which a retry or a
  // handshake's give-up is due: the poll must wake by then.
  void prepare_to_block(std::vector<pollfd>& fds, Clock::time_point& wake_by);
  // The poll() returned: `fds` are the entries prepare_to_block() appended, with their revents. Only a
  // listener that poll() found ready is accepted from, so a drive() with nothing under way costs no call.
  void after_poll(std::span<const pollfd> fds);

 private:
  struct Dial;
  struct Inbound;
  enum class Step { Continue, Done, Drop };

  std::string need() const;
  void read_addresses();
  // Reads the peer's address without waiting for it; false (and a later retry planned) while it is absent.
  bool resolve(Dial& dial);
  // Dials: false while it goes on; true once `outcome` is set.
  bool advance(Dial& dial, Outcome& outcome);
  void retry_later(Dial& dial, std::string problem);
  std::optional<Error> judge_ack(const Dial& dial, std::span<const std::byte, kAckSize> bytes) const;
  // Inbound handshakes: the listener reads the hellos, this connector judges and answers them.
  void answer(TcpListener::Greeted greeted);
  AckStatus judge(const Hello& hello, std::string_view token) const;
  Step send_answer(Inbound& in);

  std::shared_ptr<Store> store_;
  const int rank_;
  const int size_;
  const TcpOptions options_;
  std::unique_ptr<TcpListener::Mesh> listener_;  // this mesh's place on the rank's listener
  int mesh_ = 0;                                 // its number there
  std::string address_;
  std::size_t listener_polls_ = 0;  // the listener's entries, first in the last prepare_to_block()
  std::vector<TcpListener::Greeted> greeted_;
  std::vector<bool> requested_;  // by peer
  std::vector<bool> connected_;  // by peer: a link was handed out
  std::vector<std::unique_ptr<Dial>> dials_;
  std::vector<std::unique_ptr<Inbound>> inbound_;
};

}  // namespace canopy::transport
