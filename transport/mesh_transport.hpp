// A Transport over one or more IoParts: every peer's messages in each direction go through one part for the
// mesh's whole life (shared-memory rings for peers on this host, RDMA queue pairs or TCP sockets for the
// others: link_mesh.hpp chooses), so they stay in order.
// progress() drives every part on the calling thread, spins while that pays (spin_rule.hpp), then waits
// for all of them and the abort/wake eventfd in one poll(). A companion (transport.hpp) is stepped on every
// pass and its descriptors join that poll; the mesh can itself be one's descriptors in another's poll().
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/io_part.hpp"
#include "transport/shm/host_cells.hpp"
#include "transport/spin_rule.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

class MeshTransport final : public Transport {
 public:
  // `name` is what name() reports ("tcp", "shm+tcp", "shm+verbs", "verbs"); `looks_between_yields`: how long
  // progress() keeps looking between two sched_yield()s while it spins (0: it yields after every round;
  // looks_between_yields()).
  MeshTransport(int rank, int size, std::string name, std::chrono::nanoseconds looks_between_yields = {});
  ~MeshTransport() override;
  MeshTransport(const MeshTransport&) = delete;
  MeshTransport& operator=(const MeshTransport&) = delete;

  // Adds a part (the mesh owns it); its index is what route() takes. Before the first post. `spin`: how
  // long progress() busy-polls, while this part has work, before it blocks (0: never; spin_rule.hpp
  // chooses). Waiting on several parts, it spins as long as the longest of theirs.
  std::size_t add_part(std::unique_ptr<IoPart> part, std::chrono::microseconds spin);
  // Sends to `peer` (receives from it) go through part `index` from now on: set up before the first post,
  // or by a part that hands the direction, with what is pending in it, to another (shm falling back to TCP).
  void route_sends(int peer, std::size_t index) { send_route_[peer] = index; }
  void route_recvs(int peer, std::size_t index) { recv_route_[peer] = index; }
  IoPart& part(std::size_t index) { return *parts_[index]; }
  // The mesh's abort flag, for the parts to share, and the eventfd abort() writes.
  const AbortFlag& abort_state() const { return abort_; }
  int abort_fd() const { return wake_fd_.get(); }
  // The group's host cells (before the first post); the mesh owns them.
  void set_host_cells(std::unique_ptr<HostCells> cells);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return name_; }
  OpId post_send(int peer, const Envelope& envelope, std::span<const std::byte> payload) override;
  OpId post_recv(int peer, const Envelope& envelope, std::span<std::byte> destination) override;
  bool receives_in_place(int peer) const override;
  OpId post_recv_in_place(int peer, const Envelope& envelope, std::uint64_t bytes, PieceSink& sink) override;
  void expect_peers(std::span<const int> peers) override;
  bool progress(Deadline deadline, std::vector<OpId>& completed) override;
  bool add_poll_descriptors(std::vector<pollfd>& fds) override;
  void after_poll(std::span<const pollfd> fds) override;
  void set_companion(Companion* companion) override;
  void abort(const std::string& reason) override;
  void wake() override;
  // Unless a part's receivers never see the frame (verbs).
  bool carries_flags() const override { return carries_flags_; }
  std::uint8_t take_arrived_flags() override { return std::exchange(arrived_flags_, 0); }
  HostCells* host_cells() override { return host_cells_.get(); }

 private:
  void check_postable(int peer, const char* call) const;
  void drive_all(IoPart::Pass pass, Completions& done);
  bool any_busy() const;
  std::uint64_t bytes_moved() const;
  // The longest spin of the parts that have work.
  std::chrono::microseconds spin_for_busy_parts() const;
  // Drives every part until the sockets and rings have been idle for `spin` (bounded by the deadline);
  // true once something completed.
  bool spin(std::chrono::microseconds spin, Deadline deadline, Completions& done,
            std::size_t completed_before);
  // poll() on poll_fds_ until something is ready or the deadline passes; its result.
  int block(Deadline deadline);
  // The wake eventfd, then every part's descriptors; false when a part can move already.
  bool append_poll_descriptors(std::vector<pollfd>& fds);
  // Hands the parts their revents from `fds` (what add_poll_descriptors appended); true when the wake
  // eventfd was among them (then read).
  bool take_poll_results(std::span<const pollfd> fds);

  const int rank_;
  const int size_;
  const std::string name_;
  const std::chrono::nanoseconds looks_between_yields_;
  SpinBackoff spin_backoff_;
  std::vector<std::unique_ptr<IoPart>> parts_;
  std::vector<std::chrono::microseconds> part_spin_;  // part -> its spin
  std::vector<std::size_t> send_route_;               // peer -> part
  std::vector<std::size_t> recv_route_;
  std::vector<pollfd> poll_fds_;              // reused by every progress() call
  // part -> its first entry among those add_poll_descriptors() appended (one more: the end); 0 is the eventfd
  std::vector<std::size_t> poll_part_start_;
  IoPart::Pass next_pass_ = IoPart::Pass::First;  // of the next progress(): Polled after another's poll()
  Companion* companion_ = nullptr;
  UniqueFd wake_fd_;                          // eventfd written by abort() and wake()
  OpId next_id_ = 1;
  std::uint8_t arrived_flags_ = 0;  // ORed from messages with a payload, until take_arrived_flags()
  bool carries_flags_ = true;       // every part's frames carry the flags
  AbortFlag abort_;
  std::unique_ptr<HostCells> host_cells_;  // after abort_: they hold a reference to it
};

}  // namespace canopy::transport
