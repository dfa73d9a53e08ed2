#include "transport/mesh_transport.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/error.hpp"
#include "common/fd_limit.hpp"

namespace canopy::transport {
namespace {

// Payloads beyond this are refused up front, so that header + payload can never overflow a u64.
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 62;

}  // namespace

MeshTransport::MeshTransport(int rank, int size, std::string name,
                             std::chrono::nanoseconds looks_between_yields)
    : rank_(rank),
      size_(size),
      name_(std::move(name)),
      looks_between_yields_(looks_between_yields),
      send_route_(static_cast<std::size_t>(size), 0),
      recv_route_(static_cast<std::size_t>(size), 0) {
  wake_fd_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_.valid()) {
    const int err = errno;
    fail_descriptor_call(fmt::format("rank {}: eventfd() for the {} mesh", rank, name_), err);
  }
  poll_fds_.reserve(static_cast<std::size_t>(size) * 2 + 2);
}

// The parts and cells hold references to the abort flag, which a part's teardown may read (verbs waits for
// its copied-aside sends unless aborted): they go first.
MeshTransport::~MeshTransport() {
  host_cells_.reset();
  parts_.clear();
}

std::size_t MeshTransport::add_part(std::unique_ptr<IoPart> part, std::chrono::microseconds spin) {
  carries_flags_ = carries_flags_ && part->carries_flags();
  parts_.push_back(std::move(part));
  part_spin_.push_back(spin);
  poll_part_start_.resize(parts_.size() + 1);
  return parts_.size() - 1;
}

void MeshTransport::check_postable(int peer, const char* call) const {
  abort_.throw_if_raised(rank_);
  check_peer(rank_, size_, peer, call);
}

OpId MeshTransport::post_send(int peer, const Envelope& envelope, std::span<const std::byte> payload) {
  check_postable(peer, "post_send");
  if (payload.size() > kMaxPayloadBytes)
    fail(ErrorCode::InvalidArgument,
         "rank {}: post_send of {} bytes to rank {}: at most {} bytes per message", rank_, payload.size(),
         peer, kMaxPayloadBytes);
  const OpId id = next_id_++;
  parts_[send_route_[peer]]->post_send(id, peer, envelope, payload);
  return id;
}

OpId MeshTransport::post_recv(int peer, const Envelope& envelope, std::span<std::byte> destination) {
  check_postable(peer, "post_recv");
  const OpId id = next_id_++;
  parts_[recv_route_[peer]]->post_recv(id, peer, envelope, destination);
  return id;
}

void MeshTransport::expect_peers(std::span<const int> peers) {
  // Rare (a schedule's first run, a probe): the few peers are sorted by part on the spot.
  for (std::size_t index = 0; index < parts_.size(); ++index) {
    std::vector<int> routed;
    for (int peer : peers)
      if (peer >= 0 && peer < size_ && peer != rank_ && send_route_[peer] == index) routed.push_back(peer);
    if (!routed.empty()) parts_[index]->expect_peers(routed);
  }
}

bool MeshTransport::receives_in_place(int peer) const {
  return peer >= 0 && peer < size_ && peer != rank_ && parts_[recv_route_[peer]]->receives_in_place(peer);
}

OpId MeshTransport::post_recv_in_place(int peer, const Envelope& envelope, std::uint64_t bytes,
                                       PieceSink& sink) {
  check_postable(peer, "post_recv_in_place");
  const OpId id = next_id_++;
  parts_[recv_route_[peer]]->post_recv_in_place(id, peer, envelope, bytes, sink);
  return id;
}

void MeshTransport::drive_all(IoPart::Pass pass, Completions& done) {
  for (auto& part : parts_) part->drive(pass, done);
}

bool MeshTransport::any_busy() const {
  return std::any_of(parts_.begin(), parts_.end(), [](const auto& part) { return part->busy(); });
}

std::uint64_t MeshTransport::bytes_moved() const {
  std::uint64_t moved = 0;
  for (const auto& part : parts_) moved += part->bytes_moved();
  return moved;
}

std::chrono::microseconds MeshTransport::spin_for_busy_parts() const {
  std::chrono::microseconds longest{0};
  for (std::size_t i = 0; i < parts_.size(); ++i)
    if (parts_[i]->busy()) longest = std::max(longest, part_spin_[i]);
  return longest;
}

// The spin ends once the links have been idle for `spin`: while a large message streams in, it keeps
// draining instead of sleeping between the sender's bursts. It offers the core to any other runnable
// process (sched_yield) at least every looks_between_yields_: the peer we wait for may be queued behind
// us, and a busy machine's other work must not starve while we only wait.
bool MeshTransport::spin(std::chrono::microseconds spin, Deadline deadline, Completions& done,
                         std::size_t completed_before) {
  Deadline until = Deadline::after(spin).earlier(deadline);
  Clock::time_point next_yield = Clock::now() + looks_between_yields_;
  std::uint64_t moved_before = bytes_moved();
  for (Clock::time_point now = Clock::now(); now < until.at() && !abort_.raised(); now = Clock::now()) {
    drive_all(IoPart::Pass::Spin, done);
    if (companion_) companion_->step();
    if (done.ids.size() > completed_before) return true;
    if (const std::uint64_t moved = bytes_moved(); moved != moved_before) {
      moved_before = moved;
      until = Deadline(now + spin).earlier(deadline);
    }
    if (now >= next_yield) {
      ::sched_yield();
      next_yield = Clock::now() + looks_between_yields_;
    } else {
      pause_briefly();
    }
  }
  return false;
}

bool MeshTransport::progress(Deadline deadline, std::vector<OpId>& completed) {
  const std::size_t completed_before = completed.size();
  Completions done{completed, arrived_flags_};
  IoPart::Pass pass = std::exchange(next_pass_, IoPart::Pass::First);
  for (;;) {
    abort_.throw_if_raised(rank_);
    drive_all(pass, done);
    if (companion_) companion_->step();
    if (completed.size() > completed_before) return true;
    if (deadline.expired()) return false;
    if (const auto spin_now = spin_for_busy_parts(); spin_now.count() > 0 && spin_backoff_.should_spin()) {
      const bool completed_while_spinning = spin(spin_now, deadline, done, completed_before);
      spin_backoff_.record(completed_while_spinning);
      if (completed_while_spinning) return true;
    }
    if (deadline.is_never() && !any_busy())
      fail(ErrorCode::InvalidArgument,
           "rank {}: progress() without a deadline while no operation is pending would wait forever", rank_);

    poll_fds_.clear();
    const bool can_block = append_poll_descriptors(poll_fds_);
    int ready = 0;
    if (can_block) {
      Deadline wake = deadline;
      for (const auto& part : parts_) wake = wake.earlier(Deadline(part->wake_by()));
      ready = block(wake);
      if (ready < 0 && errno != EINTR) fail_errno(fmt::format("rank {}: poll", rank_));
    }
    const bool woken = take_poll_results(poll_fds_);
    // Something became ready while a part announced it would sleep: drive everything again at once.
    pass = can_block ? IoPart::Pass::Polled : IoPart::Pass::Spin;
    // wake(): the caller has new work for this thread.
    if (woken && !abort_.raised()) return completed.size() > completed_before;
  }
}

bool MeshTransport::add_poll_descriptors(std::vector<pollfd>& fds) {
  const bool can_block = append_poll_descriptors(fds);
  // Waited on in another's poll: the next progress() moves what it announced.
  next_pass_ = can_block ? IoPart::Pass::Polled : IoPart::Pass::Spin;
  return can_block;
}

bool MeshTransport::append_poll_descriptors(std::vector<pollfd>& fds) {
  const std::size_t first = fds.size();
  fds.push_back({wake_fd_.get(), POLLIN, 0});
  bool can_block = true;
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    poll_part_start_[i] = fds.size() - first;
    can_block = parts_[i]->prepare_to_block(fds) && can_block;
  }
  poll_part_start_[parts_.size()] = fds.size() - first;
  return can_block;
}

void MeshTransport::after_poll(std::span<const pollfd> fds) {
  take_poll_results(fds);
}

bool MeshTransport::take_poll_results(std::span<const pollfd> fds) {
  for (std::size_t i = 0; i < parts_.size(); ++i)
    parts_[i]->after_poll(fds.subspan(poll_part_start_[i], poll_part_start_[i + 1] - poll_part_start_[i]));
  if (fds[0].revents == 0) return false;
  std::uint64_t count = 0;
  [[maybe_unused]] auto n = ::read(wake_fd_.get(), &count, sizeof(count));
  return true;
}

void MeshTransport::set_companion(Companion* companion) {
  companion_ = companion;
  if (host_cells_) host_cells_->set_companion(companion);
}

int MeshTransport::block(Deadline deadline) {
  if (!host_cells_) return poll_beside(poll_fds_, companion_, deadline);
  // A peer may run this call through the host's cells while this rank waits for its messages: what the
  // peers declared says so, now and every kLookAgain while nothing arrives.
  for (;;) {
    host_cells_->check_peers_run_this_call();
    const Deadline look_again = Deadline::after(HostCells::kLookAgain).earlier(deadline);
    const int ready = poll_beside(poll_fds_, companion_, look_again);
    if (ready != 0 || deadline.expired()) return ready;
  }
}

void MeshTransport::abort(const std::string& reason) {
  if (!abort_.raise(reason)) return;
  // Peers blocked on us learn at once that nothing more will come.
  for (auto& part : parts_) part->shut_down();
  if (host_cells_) host_cells_->interrupt();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof(one));
}

void MeshTransport::set_host_cells(std::unique_ptr<HostCells> cells) {
  host_cells_ = std::move(cells);
}

void MeshTransport::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof(one));
}

}  // namespace canopy::transport
