// Forming the full mesh: publish, connect down, accept up. Connections only go from a higher rank to a
// lower one, so the waits form no cycle: rank 0 accepts at once, rank 1 accepts as soon as it reached
// rank 0, and so on; every rank serves all its inbound handshakes concurrently in one poll loop.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/cpu_list.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/spin_rule.hpp"
#include "transport/tcp/handshake.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_links.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr auto kRetryPause = milliseconds(20);

long long millis(Duration d) {
  return d.count();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

// Waits for `events` on fd until the deadline; false when the deadline passed.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ready = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (ready > 0) return true;
    if (ready == 0 && deadline.expired()) return false;
    if (ready < 0 && errno != EINTR) fail_errno("poll");
  }
}

// The outcome of one attempt to reach a lower rank: done, or worth another try after a pause.
struct Attempt {
  bool connected = false;
  std::string problem;  // why not, for the timeout message
};

class MeshBuilder {
 public:
  MeshBuilder(Store& store, int rank, int size, const TcpOptions& options)
      : store_(store),
        rank_(rank),
        size_(size),
        options_(options),
        deadline_(Deadline::after(options.connect_timeout)),
        links_(static_cast<std::size_t>(size)) {}

  std::vector<PeerLink> build() {
    if (size_ == 1) return std::move(links_);
    listen_and_publish();
    for (int peer = 0; peer < rank_; ++peer) connect_to(peer);
    accept_higher_ranks();
    listener_.reset();
    for (int peer = 0; peer < size_; ++peer)
      if (peer != rank_) configure_data_socket(links_[peer].fd.get());
    log::info("rank {}: TCP mesh of {} ranks for comm {} is up", rank_, size_, options_.comm_id);
    return std::move(links_);
  }

 private:
  // What an Error(Resource) says this mesh needs.
  std::string need() const {
    return fmt::format(
        "rank {}'s TCP mesh of {} ranks (comm {}) needs {} descriptors: a socket for each of its {} peers, a "
        "listener while it forms and an eventfd",
        rank_, size_, options_.comm_id, size_ + 1, size_ - 1);
  }

  // ---- publishing ----
  void listen_and_publish() {
    InterfaceAddress chosen =
        choose_interface(list_interfaces(), options_.socket_ifname, options_.socket_family);
    listener_ = listen_on(chosen.address, size_ + 64, need());
    std::string address = SocketAddress::local_of(listener_.get()).to_string();
    log::info("rank {}: listening on {} (interface {}{}) for comm {}", rank_, address, chosen.name,
              options_.socket_ifname.empty() ? ", the default choice" : ", from CANOPY_SOCKET_IFNAME",
              options_.comm_id);
    store_.set(tcp_address_key(options_.comm_id, rank_), address);
  }

  SocketAddress address_of(int peer) {
    std::string key = tcp_address_key(options_.comm_id, peer);
    try {
      return SocketAddress::parse(store_.get(key, duration_cast<Duration>(deadline_.remaining())));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
      fail(ErrorCode::Timeout,
           "rank {}: TCP mesh set-up for comm {} timed out after {} ms: rank {} never published "
           "its address (store key '{}'); is it running, with the same store and world size {}?",
           rank_, options_.comm_id, millis(options_.connect_timeout), peer, key, size_);
    }
  }

  // ---- connecting down ----
  void connect_to(int peer) {
    SocketAddress address = address_of(peer);
    std::string problem = "no attempt finished";
    while (!deadline_.expired()) {
      Attempt attempt = try_connect(peer, address);
      if (attempt.connected) return;
      problem = attempt.problem;
      log::debug("rank {}: connecting to rank {} at {}: {}; retrying", rank_, peer, address.to_string(),
                 problem);
      std::this_thread::sleep_for(std::min<Clock::duration>(kRetryPause, deadline_.remaining()));
    }
    fail(ErrorCode::Timeout,
         "rank {}: TCP mesh set-up for comm {} timed out after {} ms: never connected with rank {} "
         "at {} (last problem: {})",
         rank_, options_.comm_id, millis(options_.connect_timeout), peer, address.to_string(), problem);
  }

  Attempt try_connect(int peer, const SocketAddress& address) {
    int error = 0;
    UniqueFd fd = start_connect(address, error, need());
    if (error == EINPROGRESS) {
      if (!wait_for(fd.get(), POLLOUT, deadline_)) return {false, "connect() did not finish"};
      socklen_t length = sizeof(error);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    }
    if (error != 0) return {false, fmt::format("connect: {}", std::strerror(error))};

    Hello hello{.comm_id = options_.comm_id,
                .rank = static_cast<std::uint32_t>(rank_),
                .size = static_cast<std::uint32_t>(size_)};
    std::vector<std::byte> bytes = encode_hello(hello, options_.job_token);
    if (auto problem = send_all(fd.get(), bytes); !problem.empty()) return {false, problem};
    std::array<std::byte, kAckSize> answer{};
    if (auto problem = recv_all(fd.get(), answer); !problem.empty()) return {false, problem};

    Ack ack;
    try {
      ack = decode_ack(answer);
    } catch (const Error& e) {
      fail(ErrorCode::Protocol,
           "rank {}: the address published for rank {} ({}) answered with something that is not "
           "a Canopy handshake: {}",
           rank_, peer, address.to_string(), e.what());
    }
    if (ack.status != AckStatus::Accepted)
      fail(ack.status == AckStatus::WrongToken ? ErrorCode::Config : ErrorCode::Protocol,
           "rank {}: rank {} ({}) refused the connection for comm {}: {}{}", rank_, peer, address.to_string(),
           options_.comm_id, to_string(ack.status),
           ack.status == AckStatus::WrongToken ? " (every rank must have the same CANOPY_JOB_TOKEN)" : "");
    if (ack.rank != static_cast<std::uint32_t>(peer) || ack.comm_id != options_.comm_id)
      fail(ErrorCode::Protocol,
           "rank {}: the address published for rank {} of comm {} ({}) answered as rank {} of "
           "comm {}: stale keys from an earlier round in the store?",
           rank_, peer, options_.comm_id, address.to_string(), ack.rank, ack.comm_id);
    links_[peer] = PeerLink{std::move(fd), address.to_string()};
    return {true, {}};
  }

  // Blocking send/receive of a handshake under the mesh deadline; returns what went wrong, or "".
  std::string send_all(int fd, std::span<const std::byte> bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!wait_for(fd, POLLOUT, deadline_)) return "sending the handshake did not finish";
      } else if (n < 0 && errno != EINTR) {
        return fmt::format("sending the handshake: {}", std::strerror(errno));
      }
    }
    return {};
  }

  std::string recv_all(int fd, std::span<std::byte> bytes) {
    std::size_t got = 0;
    while (got < bytes.size()) {
      ssize_t n = ::recv(fd, bytes.data() + got, bytes.size() - got, MSG_DONTWAIT);
      if (n > 0) {
        got += static_cast<std::size_t>(n);
      } else if (n == 0) {
        return "the peer closed the connection during the handshake";
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!wait_for(fd, POLLIN, deadline_)) return "no handshake answer";
      } else if (errno != EINTR) {
        return fmt::format("receiving the handshake answer: {}", std::strerror(errno));
      }
    }
    return {};
  }

  // ---- accepting up ----
  struct Inbound {
    UniqueFd fd;
    std::string address;
    Clock::time_point give_up;
    std::array<std::byte, kHelloSize> head{};
    std::size_t head_received = 0;
    Hello hello;
    std::string token;  // sized once the hello announced it
    std::size_t token_received = 0;
    std::array<std::byte, kAckSize> ack{};
    std::size_t ack_sent = 0;
    bool answering = false;
    AckStatus status = AckStatus::Accepted;
  };
  enum class Step { Continue, Done, Drop };

  std::vector<int> missing_higher() const {
    std::vector<int> missing;
    for (int peer = rank_ + 1; peer < size_; ++peer)
      if (!links_[peer].fd.valid()) missing.push_back(peer);
    return missing;
  }

  void accept_higher_ranks() {
    std::vector<Inbound> inbound;
    std::vector<pollfd> fds;
    while (!missing_higher().empty()) {
      if (deadline_.expired())
        fail(ErrorCode::Timeout,
             "rank {}: TCP mesh set-up for comm {} timed out after {} ms: ranks {} never "
             "connected (they published no address, could not reach {}, or were refused: see their logs)",
             rank_, options_.comm_id, millis(options_.connect_timeout), rank_list(missing_higher()),
             SocketAddress::local_of(listener_.get()).to_string());
      fds.clear();
      fds.push_back({listener_paused_ ? -1 : listener_.get(), POLLIN, 0});
      Deadline wake = deadline_;
      for (const Inbound& in : inbound) {
        fds.push_back({in.fd.get(), static_cast<short>(in.answering ? POLLOUT : POLLIN), 0});
        wake = wake.earlier(Deadline(in.give_up));
      }
      if (::poll(fds.data(), fds.size(), wake.poll_timeout_ms()) < 0 && errno != EINTR) fail_errno("poll");

      const auto now = Clock::now();
      for (std::size_t i = inbound.size(); i-- > 0;) {
        Step step = Step::Continue;
        if (fds[i + 1].revents != 0) step = advance(inbound[i]);
        if (step == Step::Continue && now >= inbound[i].give_up) {
          log::warn("rank {}: dropped a connection from {}: no complete handshake within {} ms", rank_,
                    inbound[i].address, millis(options_.handshake_timeout));
          step = Step::Drop;
        }
        if (step != Step::Continue) {
          inbound.erase(inbound.begin() + static_cast<std::ptrdiff_t>(i));
          listener_paused_ = false;  // a handshake ended: accept() may work again
        }
      }
      if (fds[0].revents != 0) accept_pending(inbound);
    }
    if (!inbound.empty())
      log::debug("rank {}: closing {} unfinished stray connection(s) now that the mesh is complete", rank_,
                 inbound.size());
  }

  void accept_pending(std::vector<Inbound>& inbound) {
    for (;;) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (out_of_descriptors(errno)) {
          // accept() fails at once for as long as a connection waits, so polling the listener now would
          // spin. A handshake under way may still end as a stray and free a descriptor; with none, no
          // peer can ever be accepted.
          const int err = errno;
          if (inbound.empty())
            fail_descriptor_call(
                fmt::format("rank {}: accept() of ranks {} on {}", rank_, rank_list(missing_higher()),
                            SocketAddress::local_of(listener_.get()).to_string()),
                err, need());
          log::debug("rank {}: accept: {}; waiting for the {} handshake(s) under way", rank_,
                     std::strerror(err), inbound.size());
          listener_paused_ = true;
          return;
        }
        if (errno == ENOBUFS || errno == ENOMEM) {  // the kernel's memory: it may come back, so retry later
          log::warn("rank {}: accept: {}; retrying in {} ms", rank_, std::strerror(errno),
                    kRetryPause.count());
          std::this_thread::sleep_for(kRetryPause);
          return;
        }
        fail_errno(fmt::format("rank {}: accept on {}", rank_,
                               SocketAddress::local_of(listener_.get()).to_string()));
      }
      Inbound in;
      in.fd = UniqueFd(fd);
      in.address = SocketAddress::peer_of(fd).to_string();
      in.give_up = Clock::now() + options_.handshake_timeout;
      inbound.push_back(std::move(in));
    }
  }

  // Reads the hello and its token, judges them, sends the answer. Drop closes the connection (the caller
  // erases it).
  Step advance(Inbound& in) {
    while (!in.answering) {
      const bool in_head = in.head_received < kHelloSize;
      std::byte* target = in_head ? in.head.data() + in.head_received
                                  : reinterpret_cast<std::byte*>(in.token.data()) + in.token_received;
      std::size_t want = in_head ? kHelloSize - in.head_received : in.token.size() - in.token_received;
      if (want > 0) {
        ssize_t n = ::recv(in.fd.get(), target, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::Continue;
        if (n <= 0) {
          log::warn("rank {}: dropped a connection from {}: closed before completing the handshake", rank_,
                    in.address);
          return Step::Drop;
        }
        (in_head ? in.head_received : in.token_received) += static_cast<std::size_t>(n);
        if (!in_head || in.head_received < kHelloSize) continue;
        try {
          in.hello = decode_hello(in.head);
        } catch (const Error& e) {
          log::warn("rank {}: dropped a connection from {}: {}", rank_, in.address, e.what());
          return Step::Drop;
        }
        in.token.resize(in.hello.token_bytes);
        continue;
      }
      in.status = judge(in.hello, in.token);
      in.ack = encode_ack(
          Ack{.status = in.status, .comm_id = options_.comm_id, .rank = static_cast<std::uint32_t>(rank_)});
      in.answering = true;
    }
    return send_answer(in);
  }

  AckStatus judge(const Hello& hello, std::string_view token) const {
    if (!tokens_equal(token, options_.job_token)) return AckStatus::WrongToken;
    if (hello.comm_id != options_.comm_id) return AckStatus::WrongComm;
    if (hello.size != static_cast<std::uint32_t>(size_) || hello.rank <= static_cast<std::uint32_t>(rank_) ||
        hello.rank >= static_cast<std::uint32_t>(size_))
      return AckStatus::BadRank;
    if (links_[hello.rank].fd.valid()) return AckStatus::Duplicate;
    return AckStatus::Accepted;
  }

  Step send_answer(Inbound& in) {
    while (in.ack_sent < kAckSize) {
      ssize_t n = ::send(in.fd.get(), in.ack.data() + in.ack_sent, kAckSize - in.ack_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        in.ack_sent += static_cast<std::size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Step::Continue;
      } else if (errno != EINTR) {
        log::warn("rank {}: dropped a connection from {}: answering the handshake: {}", rank_, in.address,
                  std::strerror(errno));
        return Step::Drop;
      }
    }
    if (in.status != AckStatus::Accepted) {
      log::warn("rank {}: refused a connection from {} claiming rank {} of comm {} (group of {}): {}", rank_,
                in.address, in.hello.rank, in.hello.comm_id, in.hello.size, to_string(in.status));
      return Step::Drop;
    }
    log::debug("rank {}: accepted rank {} from {}", rank_, in.hello.rank, in.address);
    links_[in.hello.rank] = PeerLink{std::move(in.fd), in.address};
    return Step::Done;
  }

  Store& store_;
  const int rank_;
  const int size_;
  const TcpOptions& options_;
  const Deadline deadline_;
  UniqueFd listener_;
  bool listener_paused_ = false;  // out of descriptors: not polled until a handshake under way ends
  std::vector<PeerLink> links_;
};

}  // namespace

std::string tcp_address_key(std::uint64_t comm_id, int rank) {
  return fmt::format("tcp/{}/addr/{}", comm_id, rank);
}

TcpOptions TcpOptions::from(const MeshOptions& mesh) {
  const Settings& settings = mesh.settings;
  TcpOptions options;
  take_mesh_facts(mesh, options);
  options.job_token = mesh.job_token;
  options.socket_ifname = settings.text("CANOPY_SOCKET_IFNAME");
  options.socket_family = settings.choice("CANOPY_SOCKET_FAMILY");
  if (settings.has("CANOPY_SOCKET_SPIN_US")) options.spin = settings.duration("CANOPY_SOCKET_SPIN_US");
  if (!mesh.spin) options.spin = std::chrono::microseconds(0);
  return options;
}

std::vector<PeerLink> connect_tcp_links(Store& store, int rank, int size, const TcpOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "connect_tcp_mesh: rank {} is not in a group of size {}", rank, size);
  return MeshBuilder(store, rank, size, options).build();
}

std::chrono::microseconds chosen_spin(const TcpOptions& options, int size) {
  const int local_ranks = options.local_size > 0 ? options.local_size : size;
  const int cores = options.host_cores > 0 ? options.host_cores : usable_cores();
  return announce_spin("sockets", "CANOPY_SOCKET_SPIN_US", options.spin, local_ranks, cores, kDefaultSpin);
}

std::unique_ptr<Transport> connect_tcp_mesh(Store& store, int rank, int size, const TcpOptions& options) {
  auto links = connect_tcp_links(store, rank, size, options);
  auto mesh = std::make_unique<MeshTransport>(rank, size, "tcp");
  mesh->add_part(std::make_unique<TcpLinks>(rank, std::move(links), mesh->abort_state()),
                 chosen_spin(options, size));
  return mesh;
}

}  // namespace canopy::transport
