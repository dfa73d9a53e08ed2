// A rank's TCP listener, shared by every mesh of the process's communicators (each communicator's
// collectives and point-to-point meshes, and its sub-communicators'), so that a rank holds one listening
// socket however many meshes it forms. It accepts, reads each connection's hello, and hands the connection
// to the mesh the hello names (its comm id and mesh number); that mesh's TcpConnector judges the hello and
// answers it.
//
// The meshes are driven by different threads (a blocking collective's caller, the communicator's progress
// thread), and any of them may be the one that is running when a peer dials: every mesh's poll() waits on
// the listener and on the hellos under way, and whichever thread finds one ready moves it. A connection
// greeted on one thread for another mesh rings that mesh's doorbell (an eventfd its poll() waits on), so the
// mesh that waits for it wakes at once. A hello for a mesh not attached yet (a peer that formed a group
// first) is held for the handshake timeout, then refused with AckStatus::NoSuchMesh, which its dialler
// retries.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "transport/tcp/handshake.hpp"
#include "transport/tcp/socket.hpp"

namespace canopy::transport {

// What `meshes` TCP meshes of a group of `size` sharing one listener hold to reach every peer, for an
// out-of-descriptors error: a socket a peer in each mesh, the listener, and each mesh's two eventfds.
std::string tcp_descriptor_need(int rank, int size, int meshes, std::uint64_t comm_id);

class TcpListener : public std::enable_shared_from_this<TcpListener> {
 public:
  // An accepted connection whose hello (and token) arrived, for its mesh to judge and answer.
  struct Greeted {
    UniqueFd fd;
    std::string address;  // the dialling peer's "ip:port", for messages
    Hello hello;
    std::string token;
  };

  // One mesh's place on the listener, for its TcpConnector; detaches when destroyed (connections greeted
  // for it and not taken yet are closed).
  class Mesh {
   public:
    ~Mesh();
    Mesh(const Mesh&) = delete;
    Mesh& operator=(const Mesh&) = delete;

    const std::string& address() const { return listener_->address(); }
    // For the mesh's poll(): its doorbell, the listener and the hellos under way, and the time by which a
    // hello's give-up is due.
    void prepare_to_block(std::vector<pollfd>& fds, Clock::time_point& wake_by);
    // `fds` are the entries prepare_to_block() appended, with their revents.
    void after_poll(std::span<const pollfd> fds);
    // Accepts what poll() found waiting and reads the hellos under way as far as they go without
    // blocking; appends the connections greeted for this mesh. Costs no call while nothing is under way.
    // Error(Resource) where the rank is out of descriptors with no handshake under way to free one.
    void drive(std::vector<Greeted>& greeted);

   private:
    friend class TcpListener;
    Mesh(std::shared_ptr<TcpListener> listener, std::uint64_t comm_id, int mesh, std::string need);

    const std::shared_ptr<TcpListener> listener_;
    const std::pair<std::uint64_t, int> route_;  // comm id, mesh number
    const std::string need_;
    UniqueFd doorbell_;                 // an eventfd
    std::vector<Greeted> greeted_;      // under the listener's mutex
    std::atomic<bool> waiting_{false};  // greeted_ is not empty
    // The mesh's own thread's: whether its last poll() found an entry ready, the doorbell among them, and
    // where its last prepare_to_block() put the doorbell and the listener among the entries it appended.
    bool poked_ = false;
    bool doorbell_rang_ = false;
    std::size_t polled_ = 0;
    std::size_t doorbell_at_ = 0;
    std::size_t listener_at_ = 0;
  };

  // Takes `listener` (listening, non-blocking) at `address`. A connection that has not sent its whole
  // hello within `handshake_timeout` is dropped (a port scanner, a stray client), and one for a mesh that
  // is not attached by then is refused.
  static std::shared_ptr<TcpListener> make(int rank, UniqueFd listener, std::string address,
                                           Duration handshake_timeout);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  const std::string& address() const { return address_; }
  // Mesh `mesh` of communicator `comm_id` takes the connections whose hello names both; `need` is what
  // an out-of-descriptors error says its communicator needs. Error(InvalidArgument) where that mesh is
  // attached already.
  std::unique_ptr<Mesh> attach(std::uint64_t comm_id, int mesh, std::string need);
  // The meshes attached now.
  int meshes() const;

 private:
  struct Arriving;
  struct Unclaimed {
    Greeted greeted;
    Clock::time_point give_up;
  };

  TcpListener(int rank, UniqueFd listener, std::string address, Duration handshake_timeout);
  void detach(Mesh& mesh);
  // Under mutex_, for `by`'s thread.
  void drive_for(Mesh& by, std::vector<Greeted>& greeted);
  void accept_pending(const std::string& need);
  // Reads `in`'s hello; false while it goes on. Sets `in.dropped` where the connection is to be closed.
  bool advance(Arriving& in);
  void route(Greeted greeted, Clock::time_point now, const Mesh& by);
  void refuse(Greeted& greeted, const std::string& why);
  void count_pending();

  const int rank_;
  const Duration handshake_timeout_;
  const std::string address_;
  mutable std::mutex mutex_;
  UniqueFd listener_;
  bool listener_ready_ = false;   // a poll() found a connection waiting
  bool listener_paused_ = false;  // out of descriptors: not polled until a hello under way ends
  std::vector<std::unique_ptr<Arriving>> arriving_;
  std::vector<Unclaimed> unclaimed_;     // greeted for a mesh not attached (yet)
  std::atomic<std::size_t> pending_{0};  // arriving_ and unclaimed_ together
  std::map<std::pair<std::uint64_t, int>, Mesh*> meshes_;
};

}  // namespace canopy::transport
