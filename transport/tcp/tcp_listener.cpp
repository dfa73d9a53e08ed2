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

}  // namespace

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

std::string tcp_descriptor_need(int rank, int size, int meshes, std::uint64_t comm_id) {
  // A mesh's wake-up eventfd, and where meshes share the listener a doorbell each.
  const int eventfds = meshes * (meshes > 1 ? 2 : 1);
  const int total = meshes * (size - 1) + 1 + eventfds;
  const std::string links = "links made on first use need a socket only for each peer a mesh has talked to";
  if (meshes == 1)
    return fmt::format(
        "rank {}'s TCP mesh of {} ranks (comm {}) needs {} descriptors to hold a link with every peer: a "
        "socket for each of its {} peers, its listener and an eventfd ({})",
        rank, size, comm_id, total, size - 1, links);
  return fmt::format(
      "rank {}'s {} TCP meshes of {} ranks (comm {}) need {} descriptors to hold a link with every peer: a "
      "socket for each of its {} peers in each mesh, the listener they share and {} eventfds ({})",
      rank, meshes, size, comm_id, total, size - 1, eventfds, links);
}

TcpListener::TcpListener(int rank, UniqueFd listener, std::string address, int meshes,
                         Duration handshake_timeout, std::string need)
    : rank_(rank),
      handshake_timeout_(handshake_timeout),
      need_(std::move(need)),
      address_(std::move(address)),
      listener_(std::move(listener)),
      meshes_(static_cast<std::size_t>(meshes)) {
  if (meshes < 1 || meshes > 255)
    fail(ErrorCode::InvalidArgument, "rank {}: a TCP listener serves 1 to 255 meshes, not {}", rank, meshes);
  if (meshes == 1) return;
  for (Mesh& mesh : meshes_) {
    mesh.doorbell = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!mesh.doorbell.valid())
      fail_descriptor_call(
          fmt::format("rank {}: eventfd() for a mesh sharing the TCP listener {}", rank_, address_), errno,
          need_);
  }
}

TcpListener::~TcpListener() = default;

void TcpListener::prepare_to_block(int mesh, std::vector<pollfd>& fds, Clock::time_point& wake_by) {
  Mesh& m = meshes_[static_cast<std::size_t>(mesh)];
  const std::size_t start = fds.size();
  m.doorbell_at = m.listener_at = kNone;
  if (m.doorbell.valid()) {
    m.doorbell_at = fds.size() - start;
    fds.push_back({m.doorbell.get(), POLLIN, 0});
  }
  std::lock_guard lock(mutex_);
  if (!listener_paused_) {
    m.listener_at = fds.size() - start;
    fds.push_back({listener_.get(), POLLIN, 0});
  }
  for (const auto& in : arriving_) {
    fds.push_back({in->fd.get(), POLLIN, 0});
    wake_by = std::min(wake_by, in->give_up);
  }
  m.polled = fds.size() - start;
}

void TcpListener::after_poll(int mesh, std::span<const pollfd> fds) {
  Mesh& m = meshes_[static_cast<std::size_t>(mesh)];
  const std::size_t polled = std::min(m.polled, fds.size());
  m.polled = 0;
  for (std::size_t i = 0; i < polled; ++i) {
    if (fds[i].revents == 0) continue;
    m.poked = true;
    if (i == m.doorbell_at) m.doorbell_rang = true;
    if (i == m.listener_at) {
      std::lock_guard lock(mutex_);
      listener_ready_ = true;
    }
  }
}

void TcpListener::drive(int mesh, std::vector<Greeted>& greeted) {
  Mesh& m = meshes_[static_cast<std::size_t>(mesh)];
  // The data path calls this on every pass: with nothing under way it costs three loads.
  if (!m.poked && arriving_count_.load(std::memory_order_acquire) == 0 &&
      !m.waiting.load(std::memory_order_acquire))
    return;
  m.poked = false;
  if (m.doorbell_rang) {
    m.doorbell_rang = false;
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(m.doorbell.get(), &count, sizeof(count));
  }
  std::lock_guard lock(mutex_);
  if (listener_ready_) {
    listener_ready_ = false;
    accept_pending();
  }
  const Clock::time_point now = arriving_.empty() ? Clock::time_point() : Clock::now();
  for (std::size_t i = 0; i < arriving_.size();) {
    Arriving& in = *arriving_[i];
    bool ended = advance(in);
    if (!ended && now >= in.give_up) {
      log::warn("rank {}: dropped a connection from {}: no complete handshake within {} ms", rank_,
                in.address,
                std::chrono::duration_cast<std::chrono::milliseconds>(handshake_timeout_).count());
      ended = true;
    } else if (ended && !in.dropped) {
      hand_over(in, mesh);
    }
    if (!ended) {
      ++i;
      continue;
    }
    arriving_.erase(arriving_.begin() + static_cast<std::ptrdiff_t>(i));
    listener_paused_ = false;  // a descriptor may be free again: accept() may work
  }
  arriving_count_.store(arriving_.size(), std::memory_order_release);
  for (Greeted& g : m.greeted) greeted.push_back(std::move(g));
  m.greeted.clear();
  m.waiting.store(false, std::memory_order_release);
}

void TcpListener::accept_pending() {
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
          fail_descriptor_call(fmt::format("rank {}: accept() on {}", rank_, address_), err, need_);
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

void TcpListener::hand_over(Arriving& in, int by_mesh) {
  const int to = in.hello.mesh;
  if (to >= meshes()) {
    // Answered at once (24 bytes into a fresh socket's buffer), so that the dialler learns why.
    log::warn(
        "rank {}: refused a connection from {} claiming rank {} of comm {}: it names mesh {}, and {} "
        "listens for {} mesh(es)",
        rank_, in.address, in.hello.rank, in.hello.comm_id, to, address_, meshes());
    const auto ack = encode_ack(Ack{.status = AckStatus::NoSuchMesh,
                                    .comm_id = in.hello.comm_id,
                                    .rank = static_cast<std::uint32_t>(rank_)});
    [[maybe_unused]] auto n = ::send(in.fd.get(), ack.data(), ack.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return;
  }
  Mesh& m = meshes_[static_cast<std::size_t>(to)];
  m.greeted.push_back(Greeted{std::move(in.fd), std::move(in.address), in.hello, std::move(in.token)});
  m.waiting.store(true, std::memory_order_release);
  if (to != by_mesh) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(m.doorbell.get(), &one, sizeof(one));
  }
}

}  // namespace canopy::transport
