// A rank's TCP listener, shared by the meshes of one communicator (the collectives' and the point-to-point
// one), so that a rank holds one listening socket however many meshes it forms. It accepts, reads each
// connection's hello, and hands the connection to the mesh the hello names; that mesh's TcpConnector judges
// the hello and answers it.
//
// Each mesh is driven by a thread of its own (the caller's, the point-to-point progress thread), and either
// may be the one that is running when a peer dials: every mesh's poll() waits on the listener and on the
// hellos under way, and whichever thread finds one ready moves it. A connection greeted on one thread for
// another mesh rings that mesh's doorbell (an eventfd its poll() waits on), so the mesh that waits for it
// wakes at once.
#pragma once

#include <poll.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "transport/tcp/handshake.hpp"
#include "transport/tcp/socket.hpp"

namespace canopy::transport {

// What `meshes` TCP meshes of a group of `size` sharing one listener hold to reach every peer, for an
// out-of-descriptors error: a socket a peer in each mesh, the listener, and each mesh's eventfds.
std::string tcp_descriptor_need(int rank, int size, int meshes, std::uint64_t comm_id);

class TcpListener {
 public:
  // An accepted connection whose hello (and token) arrived, for its mesh to judge and answer.
  struct Greeted {
    UniqueFd fd;
    std::string address;  // the dialling peer's "ip:port", for messages
    Hello hello;
    std::string token;
  };

  // Takes `listener` (listening, non-blocking) at `address` for `meshes` meshes. A connection that has not
  // sent its whole hello within `handshake_timeout` is dropped (a port scanner, a stray client); `need`
  // says, in an out-of-descriptors error, what the rank's meshes need.
  TcpListener(int rank, UniqueFd listener, std::string address, int meshes, Duration handshake_timeout,
              std::string need);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  const std::string& address() const { return address_; }
  int meshes() const { return static_cast<int>(meshes_.size()); }

  // For `mesh`'s poll(): its doorbell, the listener and the hellos under way, and the time by which a
  // hello's give-up is due.
  void prepare_to_block(int mesh, std::vector<pollfd>& fds, Clock::time_point& wake_by);
  // `fds` are the entries prepare_to_block(mesh) appended, with their revents.
  void after_poll(int mesh, std::span<const pollfd> fds);
  // Accepts what poll() found waiting and reads the hellos under way as far as they go without blocking;
  // appends to `greeted` the connections greeted for `mesh`. Costs no call while nothing is under way.
  // Error(Resource) where the rank is out of descriptors with no handshake under way to free one.
  void drive(int mesh, std::vector<Greeted>& greeted);

 private:
  struct Arriving;
  struct Mesh {
    UniqueFd doorbell;                 // an eventfd; none where the listener serves one mesh
    std::vector<Greeted> greeted;      // under mutex_
    std::atomic<bool> waiting{false};  // greeted is not empty
    bool poked = false;                // its thread's last poll() found an entry ready (that thread only)
    bool doorbell_rang = false;        // and the doorbell among them (that thread only)
    // Its thread's last prepare_to_block(): the entries it appended, and where the doorbell and the
    // listener were among them (that thread only).
    std::size_t polled = 0;
    std::size_t doorbell_at = 0;
    std::size_t listener_at = 0;
  };

  void accept_pending();
  // Reads `in`'s hello; false while it goes on. Sets `in.dropped` where the connection is to be closed.
  bool advance(Arriving& in);
  void hand_over(Arriving& in, int by_mesh);

  const int rank_;
  const Duration handshake_timeout_;
  const std::string need_;
  const std::string address_;
  std::mutex mutex_;
  UniqueFd listener_;
  bool listener_ready_ = false;   // a poll() found a connection waiting
  bool listener_paused_ = false;  // out of descriptors: not polled until a hello under way ends
  std::vector<std::unique_ptr<Arriving>> arriving_;
  std::atomic<std::size_t> arriving_count_{0};
  std::vector<Mesh> meshes_;
};

}  // namespace canopy::transport
