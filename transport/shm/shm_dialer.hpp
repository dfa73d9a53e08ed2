// Makes a mesh's shared-memory links when a message first needs them, as TcpConnector makes TCP's: a rank
// that forms a group of P ranks on one host then holds a link (a Unix socket and the peer's doorbell) only
// with the peers it talks to, 2 for a ring, not P - 1.
//
// Which peers share memory is known while the mesh forms, from the ranks' records (unix_listener_book.hpp):
// the same network namespace, and a listener on the lower rank of the pair. As over TCP the higher rank of
// a pair connects to the lower one, which only accepts (a lower rank with a message for a higher one waits:
// the higher one posts the matching receive and connects then), and a higher rank that connects before the
// lower one asked for it is taken too. The handshake is the one the mesh's set-up uses (shm_handshake.hpp).
// A lower rank whose listener is gone is PeerFailed; one that refuses leaves the pair to the network's links.
#pragma once

#include <poll.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "common/deadline.hpp"
#include "transport/shm/shm_handshake.hpp"
#include "transport/shm/shm_options.hpp"

namespace canopy::transport {

class ShmDialer {
 public:
  // What drive() finished with a peer: its link, or why there is none (the network carries the pair, or the
  // peer failed).
  struct Outcome {
    int peer = -1;
    ShmPeerLink link;
    std::string network;  // non-empty: the pair goes over the network's links, for this reason
    std::optional<Error> failure;
  };

  // `later`: by rank, the peers whose links this makes; `names`: by rank, the listeners of the lower of them;
  // `listener`: this rank's, which the higher of them reach; `doorbell`: this rank's, which each peer gets.
  ShmDialer(const ShmOptions& options, int rank, int size, int doorbell, UniqueFd listener,
            std::vector<std::string> names, std::vector<bool> later);

  // Asks for the link with `peer` (once): a lower peer is connected to, a higher one awaited.
  void request(int peer);
  bool requested(int peer) const { return requested_[static_cast<std::size_t>(peer)]; }

  // Moves every introduction as far as it goes without blocking; appends what finished.
  void drive(std::vector<Outcome>& outcomes);
  // The descriptors to wait on (the listener, the introductions under way) and when the poll must wake at
  // the latest (an introduction's give-up).
  void prepare_to_block(std::vector<pollfd>& fds, Clock::time_point& wake_by);
  void after_poll(std::span<const pollfd> fds);

 private:
  struct Dial {
    int peer = -1;
    UniqueFd socket;  // hello said, answer awaited
  };
  struct Inbound {
    UniqueFd socket;
    Clock::time_point give_up;
  };
  std::string need() const;
  bool expects(int peer) const;
  // A higher peer's introduction ended (linked, or left to the network).
  void taken(int peer);
  void dial(int peer, std::vector<Outcome>& outcomes);
  void accept_pending();

  const ShmOptions options_;
  const ShmIntroduction me_;
  UniqueFd listener_;
  const std::vector<std::string> names_;
  const std::vector<bool> later_;
  std::vector<bool> requested_;
  std::vector<bool> linked_;  // handed out, or given up
  std::vector<Dial> dials_;
  std::vector<Inbound> inbound_;
  int awaited_ = 0;  // higher peers asked for and not linked yet: the listener is tried without a poll
  bool listener_ready_ = false;
};

}  // namespace canopy::transport
