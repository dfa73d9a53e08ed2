#include "transport/tcp/tcp_listener.hpp"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"

namespace canopy::transport {
namespace {

constexpr std::size_t kNone = ~std::size_t{0};

long long millis(Duration d) {
  return d.count();
}

}  // namespace

std::string tcp_descriptor_need(int rank, int size, int meshes, std::uint64_t comm_id) {
  const int eventfds = 2 * meshes;  // a mesh's wake-up and its doorbell on the listener
  const int total = meshes * (size - 1) + 1 + eventfds;
  const std::string links = "links made on first use need a socket only for each peer a mesh has talked to";
  if (meshes == 1)
    return fmt::format(
        "rank {}'s TCP mesh of {} ranks (comm {}) needs {} descriptors to hold a link with every peer: a "
        "socket for each of its {} peers, the listener and 2 eventfds ({})",
        rank, size, comm_id, total, size - 1, links);
  return fmt::format(
      "rank {}'s {} TCP meshes of {} ranks (comm {}) need {} descriptors to hold a link with every peer: a "
      "socket for each of its {} peers in each mesh, the listener they share and {} eventfds ({})",
      rank, meshes, size, comm_id, total, size - 1, eventfds, links);
}

struct TcpListener::Arriving {
  UniqueFd fd;
  std::string address;
  Clock::time_point give_up;
  std::array<std::byte, kHelloSize> head{};
  std::size_t head_received = 0;
  Hello hello;
  std::string token;  // sized once the hello announced it
  std::size_t token_received = 0;
  bool dropped = false;
};

// ---- a mesh's place ----

TcpListener::Mesh::Mesh(std::shared_ptr<TcpListener> listener, std::uint64_t comm_id, int mesh,
                        std::string need)
    : listener_(std::move(listener)), route_(comm_id, mesh), need_(std::move(need)) {
  doorbell_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!doorbell_.valid())
    fail_descriptor_call(fmt::format("rank {}: eventfd() for mesh {} of comm {} on the TCP listener {}",
                                     listener_->rank_, mesh, comm_id, listener_->address_),
                         errno, need_);
}

TcpListener::Mesh::~Mesh() {
  listener_->detach(*this);
}

void TcpListener::Mesh::prepare_to_block(std::vector<pollfd>& fds, Clock::time_point& wake_by) {
  const std::size_t start = fds.size();
  doorbell_at_ = 0;
  fds.push_back({doorbell_.get(), POLLIN, 0});
  listener_at_ = kNone;
  {
    TcpListener& l = *listener_;
    std::lock_guard lock(l.mutex_);
    if (!l.listener_paused_) {
      listener_at_ = fds.size() - start;
      fds.push_back({l.listener_.get(), POLLIN, 0});
    }
    for (const auto& in : l.arriving_) {
      fds.push_back({in->fd.get(), POLLIN, 0});
      wake_by = std::min(wake_by, in->give_up);
    }
    for (const auto& held : l.unclaimed_) wake_by = std::min(wake_by, held.give_up);
  }
  polled_ = fds.size() - start;
}

void TcpListener::Mesh::after_poll(std::span<const pollfd> fds) {
  const std::size_t polled = std::min(polled_, fds.size());
  polled_ = 0;
  for (std::size_t i = 0; i < polled; ++i) {
    if (fds[i].revents == 0) continue;
    poked_ = true;
    if (i == doorbell_at_) doorbell_rang_ = true;
    if (i == listener_at_) {
      std::lock_guard lock(listener_->mutex_);
      listener_->listener_ready_ = true;
    }
  }
}

void TcpListener::Mesh::drive(std::vector<Greeted>& greeted) {
  // The data path calls this on every pass: with nothing under way it costs three loads.
  if (!poked_ && listener_->pending_.load(std::memory_order_acquire) == 0 &&
      !waiting_.load(std::memory_order_acquire))
    return;
  poked_ = false;
  if (doorbell_rang_) {
    doorbell_rang_ = false;
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(doorbell_.get(), &count, sizeof(count));
  }
  std::lock_guard lock(listener_->mutex_);
  listener_->drive_for(*this, greeted);
}

// ---- the listener ----

std::shared_ptr<TcpListener> TcpListener::make(int rank, UniqueFd listener, std::string address,
                                               Duration handshake_timeout) {
  return std::shared_ptr<TcpListener>(
      new TcpListener(rank, std::move(listener), std::move(address), handshake_timeout));
}

TcpListener::TcpListener(int rank, UniqueFd listener, std::string address, Duration handshake_timeout)
    : rank_(rank),
      handshake_timeout_(handshake_timeout),
      address_(std::move(address)),
      listener_(std::move(listener)) {}

TcpListener::~TcpListener() = default;

std::unique_ptr<TcpListener::Mesh> TcpListener::attach(std::uint64_t comm_id, int mesh, std::string need) {
  if (mesh < 0 || mesh > 255)
    fail(ErrorCode::InvalidArgument, "rank {}: a mesh on a TCP listener is numbered 0 to 255, not {}", rank_,
         mesh);
  std::unique_ptr<Mesh> attached(new Mesh(shared_from_this(), comm_id, mesh, std::move(need)));
  std::lock_guard lock(mutex_);
  if (!meshes_.emplace(attached->route_, attached.get()).second)
    fail(ErrorCode::InvalidArgument, "rank {}: mesh {} of comm {} is on the TCP listener {} already", rank_,
         mesh, comm_id, address_);
  // Peers that formed the group first may have dialled already.
  for (auto it = unclaimed_.begin(); it != unclaimed_.end();) {
    if (std::pair(it->greeted.hello.comm_id, static_cast<int>(it->greeted.hello.mesh)) != attached->route_) {
      ++it;
      continue;
    }
    attached->greeted_.push_back(std::move(it->greeted));
    it = unclaimed_.erase(it);
  }
  attached->waiting_.store(!attached->greeted_.empty(), std::memory_order_release);
  count_pending();
  return attached;
}

int TcpListener::meshes() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(meshes_.size());
}

void TcpListener::detach(Mesh& mesh) {
  std::lock_guard lock(mutex_);
  // Only its own entry: a second attach of a taken mesh failed without one.
  if (auto it = meshes_.find(mesh.route_); it != meshes_.end() && it->second == &mesh) meshes_.erase(it);
  mesh.greeted_.clear();  // their diallers see the connection close, and retry until their deadline
}

void TcpListener::count_pending() {
  pending_.store(arriving_.size() + unclaimed_.size(), std::memory_order_release);
}

void TcpListener::drive_for(Mesh& by, std::vector<Greeted>& greeted) {
  if (listener_ready_) {
    listener_ready_ = false;
    accept_pending(by.need_);
  }
  const Clock::time_point now = arriving_.empty() && unclaimed_.empty() ? Clock::time_point() : Clock::now();
  for (std::size_t i = 0; i < arriving_.size();) {
    Arriving& in = *arriving_[i];
    bool ended = advance(in);
    if (!ended && now >= in.give_up) {
      log::warn("rank {}: dropped a connection from {}: no complete handshake within {} ms", rank_,
                in.address, millis(handshake_timeout_));
      ended = true;
    } else if (ended && !in.dropped) {
      route(Greeted{std::move(in.fd), std::move(in.address), in.hello, std::move(in.token)}, now, by);
    }
    if (!ended) {
      ++i;
      continue;
    }
    arriving_.erase(arriving_.begin() + static_cast<std::ptrdiff_t>(i));
    listener_paused_ = false;  // a descriptor may be free again: accept() may work
  }
  for (auto it = unclaimed_.begin(); it != unclaimed_.end();) {
    if (now < it->give_up) {
      ++it;
      continue;
    }
    refuse(it->greeted,
           fmt::format("no mesh {} of comm {} was formed here within {} ms", it->greeted.hello.mesh,
                       it->greeted.hello.comm_id, millis(handshake_timeout_)));
    it = unclaimed_.erase(it);
  }
  count_pending();
  for (Greeted& g : by.greeted_) greeted.push_back(std::move(g));
  by.greeted_.clear();
  by.waiting_.store(false, std::memory_order_release);
}

void TcpListener::accept_pending(const std::string& need) {
  for (;;) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (would_block(errno)) return;
      if (out_of_descriptors(errno)) {
        // accept() fails at once for as long as a connection waits, so polling the listener now would
        // spin. A hello under way may still end as a stray and free a descriptor; with none, no peer can
        // ever be accepted.
        const int err = errno;
        if (arriving_.empty())
          fail_descriptor_call(fmt::format("rank {}: accept() on {}", rank_, address_), err, need);
        log::debug("rank {}: accept: {}; waiting for the {} handshake(s) under way", rank_,
                   std::strerror(err), arriving_.size());
        listener_paused_ = true;
        return;
      }
      if (errno == ENOBUFS || errno == ENOMEM) {  // the kernel's memory: it may come back on the next poll
        log::warn("rank {}: accept: {}; retrying", rank_, std::strerror(errno));
        return;
      }
      fail_errno(fmt::format("rank {}: accept on {}", rank_, address_));
    }
    auto in = std::make_unique<Arriving>();
    in->fd = UniqueFd(fd);
    in->address = SocketAddress::peer_of(fd).to_string();
    in->give_up = Clock::now() + handshake_timeout_;
    arriving_.push_back(std::move(in));
  }
}

bool TcpListener::advance(Arriving& in) {
  for (;;) {
    const bool in_head = in.head_received < kHelloSize;
    std::byte* target = in_head ? in.head.data() + in.head_received
                                : reinterpret_cast<std::byte*>(in.token.data()) + in.token_received;
    const std::size_t want = in_head ? kHelloSize - in.head_received : in.token.size() - in.token_received;
    if (want == 0) return true;
    ssize_t n = ::recv(in.fd.get(), target, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && would_block(errno)) return false;
    if (n <= 0) {
      log::warn("rank {}: dropped a connection from {}: closed before completing the handshake", rank_,
                in.address);
      in.dropped = true;
      return true;
    }
    (in_head ? in.head_received : in.token_received) += static_cast<std::size_t>(n);
    if (!in_head || in.head_received < kHelloSize) continue;
    try {
      in.hello = decode_hello(in.head);
    } catch (const Error& e) {
      log::warn("rank {}: dropped a connection from {}: {}", rank_, in.address, e.what());
      in.dropped = true;
      return true;
    }
    in.token.resize(in.hello.token_bytes);
  }
}

void TcpListener::route(Greeted greeted, Clock::time_point now, const Mesh& by) {
  const auto it = meshes_.find({greeted.hello.comm_id, static_cast<int>(greeted.hello.mesh)});
  if (it == meshes_.end()) {
    unclaimed_.push_back(Unclaimed{std::move(greeted), now + handshake_timeout_});
    return;
  }
  Mesh& to = *it->second;
  to.greeted_.push_back(std::move(greeted));
  to.waiting_.store(true, std::memory_order_release);
  if (&to != &by) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(to.doorbell_.get(), &one, sizeof(one));
  }
}

void TcpListener::refuse(Greeted& greeted, const std::string& why) {
  log::debug("rank {}: refused a connection from {} claiming rank {}: {}", rank_, greeted.address,
             greeted.hello.rank, why);
  // Answered at once (24 bytes into a fresh socket's buffer), so that the dialler learns why and retries.
  const auto ack = encode_ack(Ack{.status = AckStatus::NoSuchMesh,
                                  .comm_id = greeted.hello.comm_id,
                                  .rank = static_cast<std::uint32_t>(rank_)});
  [[maybe_unused]] auto n = ::send(greeted.fd.get(), ack.data(), ack.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace canopy::transport
