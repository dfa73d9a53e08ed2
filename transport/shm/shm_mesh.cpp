#include "transport/shm/shm_mesh.hpp"

#include <fmt/ranges.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <set>
#include <thread>

#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "rendezvous/bootstrap.hpp"
#include "transport/shm/shm_handshake.hpp"
#include "transport/shm/unix_listener_book.hpp"
#include "transport/shm/unix_socket.hpp"
#include "transport/tcp/handshake.hpp"

namespace canopy::transport {
namespace {

constexpr const char* kNoSocket = "-";

using CombineAnswers = std::function<std::string(const std::vector<std::string>&)>;

// The parts of `text` that fmt::join put together with `separator`, in order.
std::vector<std::string_view> parts_of(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t end; (end = text.find(separator)) != std::string_view::npos; text.remove_prefix(end + 1))
    parts.push_back(text.substr(0, end));
  parts.push_back(text);
  return parts;
}

// A rank as the agreements write it; Error(Protocol) for anything else.
int agreed_rank(std::string_view text) {
  int rank = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (error != std::errc() || end != text.data() + text.size() || rank < 0)
    fail(ErrorCode::Protocol, "shared memory: '{}' in the store where a rank should be", text);
  return rank;
}

class ShmPeersBuilder {
 public:
  ShmPeersBuilder(Store& store, int rank, int size, const ShmOptions& options)
      : store_(store),
        rank_(rank),
        size_(size),
        options_(options),
        deadline_(Deadline::after(options.connect_timeout)),
        me_{.rank = rank, .size = size, .options = &options} {
    peers_.links.resize(static_cast<std::size_t>(size));
    const auto& hosts = options.host_of_rank;
    if (hosts.size() != static_cast<std::size_t>(size)) return;
    for (int peer = 0; peer < size; ++peer)
      if (hosts[peer] == hosts[rank]) {
        members_.push_back(peer);
        if (peer != rank) (peer < rank ? lower_ : higher_).push_back(peer);
      }
  }

  ShmPeers build() {
    if (lower_.empty() && higher_.empty()) return std::move(peers_);
    peers_.doorbell = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!peers_.doorbell.valid())
      fail_descriptor_call("shared memory: eventfd() for this rank's doorbell", errno, need());
    me_.doorbell = peers_.doorbell.get();
    if (options_.unix_listener_book) {
      meet_through_records();
    } else {
      if (!higher_.empty()) listen();
      const std::vector<std::string> names = agree_on_sockets();
      std::vector<int> unreached;
      for (int peer : lower_)
        if (!say_hello(peer, names[position(peer)])) unreached.push_back(peer);
      accept_higher_ranks(who_connects(unreached));
    }
    listener_ = UniqueFd();
    for (int peer : lower_)
      if (peers_.links[peer].socket.valid()) hear_answer(peer);
    for (int peer = 0; peer < size_; ++peer) {
      const bool reached = peers_.links[peer].socket.valid();
      if (reached) peers_.reached.push_back(peer);
      // A link that was to be made now and failed leaves its pair to the network.
      if (reached || first_use_.contains(peer)) peers_.sharing.push_back(peer);
    }
    return std::move(peers_);
  }

 private:
  // What an Error(Resource) says these links need.
  std::string need() const {
    const std::size_t peers = lower_.size() + higher_.size();
    return fmt::format(
        "rank {}'s shared-memory links to the {} other ranks of its host need {} descriptors: a socket and a "
        "doorbell for each, its own doorbell and a listener while they form",
        rank_, peers, 2 * peers + 2);
  }

  // With the listeners made before the ranks' records were published (unix_listener_book.hpp): the names
  // and network namespaces of this host's ranks come from their records, and a pair meets exactly where
  // both share a namespace and the lower one has a listener, which both ranks know without asking.
  void meet_through_records() {
    UnixListenerBook& book = *options_.unix_listener_book;
    const int mesh = options_.unix_listener_book_mesh;
    listener_ = book.take_listener(mesh);
    std::vector<int> others = lower_;
    others.insert(others.end(), higher_.begin(), higher_.end());
    const std::vector<UnixListenerBook::Peer> read =
        book.read(others, std::chrono::duration_cast<Duration>(deadline_.remaining()));
    // On first use, the pairs that agree on the host's cells (each rank with rank 0) still meet now.
    const bool lazy = options_.links_on_first_use;
    const bool star = lazy && options_.cell_bytes > 0 && members_.size() == static_cast<std::size_t>(size_);
    std::vector<std::string> names(static_cast<std::size_t>(size_));
    std::vector<bool> later(static_cast<std::size_t>(size_), false);  // the pairs the dialer makes
    std::set<int> expected;
    for (std::size_t i = 0; i < others.size(); ++i) {
      const int peer = others[i];
      const UnixListenerBook::Peer& other = read[i];
      const std::string& name = other.names[static_cast<std::size_t>(mesh)];
      if (!book.shares_namespace(other)) {
        log::info(
            "rank {}: rank {} is on this host by the layout, but in another network namespace or kernel ({} "
            "here, {} there): the network links carry their messages",
            rank_, peer, book.part().substr(0, book.part().find(' ')), other.space);
        continue;
      }
      const bool now = !lazy || (star && (peer == 0 || rank_ == 0));
      if (peer > rank_) {
        if (!listener_.valid()) continue;
        if (!now) later[static_cast<std::size_t>(peer)] = true;
        (now ? expected : first_use_).insert(peer);
        continue;
      }
      if (name == UnixListenerBook::kNoListener) {
        log::info("rank {}: rank {} has no shared-memory listener: the network links carry their messages",
                  rank_, peer);
        continue;
      }
      names[static_cast<std::size_t>(peer)] = name;
      if (!now) {
        later[static_cast<std::size_t>(peer)] = true;
        first_use_.insert(peer);
        continue;
      }
      // It expects this rank: a socket that cannot be reached in one namespace is a failure, not a choice.
      if (!say_hello(peer, name))
        fail(ErrorCode::PeerFailed,
             "rank {}: rank {} of this host shares its network namespace, but its shared-memory socket could "
             "not be reached (did rank {} exit or crash?)",
             rank_, peer, peer);
    }
    accept_higher_ranks(std::move(expected));
    if (lazy)
      peers_.dialer = std::make_unique<ShmDialer>(options_, rank_, size_, me_.doorbell, std::move(listener_),
                                                  std::move(names), std::move(later));
  }

  void listen() {
    try {
      listener_ = listen_unix(size_ + 64, listener_name_, need());
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Resource) throw;  // TCP would need descriptors too
      log::warn("rank {}: no shared memory with the ranks of this host: {}", rank_, e.what());
      listener_ = UniqueFd();
    }
  }

  // `rank`'s place among the ranks of this host.
  std::size_t position(int rank) const {
    return static_cast<std::size_t>(std::lower_bound(members_.begin(), members_.end(), rank) -
                                    members_.begin());
  }

  // What the ranks of this host agree on (rendezvous::agree_among, the host's lowest rank gathering): each
  // sets "<what>/<rank>", and every rank of the host reads the answer from "<what>/host/<lowest>". Two store
  // requests a rank, three for the lowest, however many ranks the host has; the keys by global rank, so
  // that a timeout names the rank that never came.
  std::string agree(const std::string& what, const std::string& value, const CombineAnswers& combine) {
    const int lowest = members_.front();
    StoreUntil bounded(store_, deadline_);
    try {
      return rendezvous::agree_among(bounded, what, rank_, members_, value, combine,
                                     fmt::format("{}/host/{}", what, lowest));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
      std::vector<std::string> keys;
      for (int member : members_) keys.push_back(fmt::format("{}/{}", what, member));
      fail(ErrorCode::Timeout,
           "rank {}: shared-memory set-up for comm {} timed out: {} (is every rank of this "
           "host running?)",
           rank_, options_.comm_id,
           rank_ == lowest
               ? fmt::format("not every rank of this host published its '{}/<rank>': {}", what, e.what())
               : why_no_agreement(store_, keys, lowest));
    }
  }

  // Every rank of this host's listener name, in rank order ("-" for one that has none: the highest rank,
  // which nobody connects to, or one that could not listen). The answer holds every name of the host:
  // some 30 bytes a rank.
  std::vector<std::string> agree_on_sockets() {
    const std::string mine = listener_.valid() ? listener_name_ : std::string(kNoSocket);
    const std::string answer = agree(
        fmt::format("shm/{}/socket", options_.comm_id), mine,
        [](const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, "\n")); });
    std::vector<std::string> names;
    for (std::string_view name : parts_of(answer, '\n')) names.emplace_back(name);
    if (names.size() != members_.size())
      fail(ErrorCode::Protocol,
           "rank {}: shared-memory set-up for comm {}: rank {} published {} socket names for the {} ranks of "
           "this host",
           rank_, options_.comm_id, members_.front(), names.size(), members_.size());
    return names;
  }

  // The higher ranks of this host that will connect to this one, from every rank's list of the lower ones
  // it could not reach ("a,b"; `unreached` is this rank's). The answer has the pairs that did not meet,
  // "higher>lower" each: "" where all did, however many ranks the host has.
  std::set<int> who_connects(const std::vector<int>& unreached) {
    const std::vector<int>& members = members_;
    const std::string answer =
        agree(fmt::format("shm/{}/unreached", options_.comm_id), fmt::format("{}", fmt::join(unreached, ",")),
              [&members](const std::vector<std::string>& lists) {
                std::vector<std::string> pairs;
                for (std::size_t i = 0; i < lists.size(); ++i)
                  if (!lists[i].empty())
                    for (std::string_view lower : parts_of(lists[i], ','))
                      pairs.push_back(fmt::format("{}>{}", members[i], lower));
                return fmt::format("{}", fmt::join(pairs, " "));
              });
    std::set<int> expected(higher_.begin(), higher_.end());
    if (answer.empty()) return expected;
    for (std::string_view pair : parts_of(answer, ' ')) {
      const std::size_t arrow = pair.find('>');
      if (arrow == std::string_view::npos)
        fail(ErrorCode::Protocol, "shared memory: '{}' in the store where a pair of ranks should be", pair);
      if (agreed_rank(pair.substr(arrow + 1)) == rank_) expected.erase(agreed_rank(pair.substr(0, arrow)));
    }
    return expected;
  }

  // Connects to a lower rank's socket and says who this is; false when it cannot be reached.
  bool say_hello(int peer, const std::string& name) {
    int error = 0;
    UniqueFd fd = name == kNoSocket ? UniqueFd() : say_shm_hello(me_, name, error, need());
    if (!fd.valid()) {
      // Another network namespace (a container, an emulated host) or another kernel: no shared memory.
      log::info(
          "rank {}: rank {} is on this host by the layout, but its socket cannot be reached ({}): the "
          "network links carry their messages",
          rank_, peer, name == kNoSocket ? "it has none" : std::strerror(error));
      return false;
    }
    peers_.links[peer].socket = std::move(fd);
    return true;
  }

  void hear_answer(int peer) {
    ShmPeerLink& link = peers_.links[peer];
    ShmAnswer answer;
    while (!answer.came) {
      if (!wait_readable(link.socket.get(), deadline_))
        fail(ErrorCode::Timeout,
             "rank {}: shared-memory set-up for comm {} timed out: rank {} never answered", rank_,
             options_.comm_id, peer);
      answer = hear_shm_answer(link.socket.get(), peer);
    }
    if (!answer.accepted && !answer.refused)
      fail(ErrorCode::PeerFailed, "rank {}: rank {} {} during set-up", rank_, peer, answer.why);
    if (!answer.accepted) {
      log::warn("rank {}: rank {}: {}: the network links carry their messages", rank_, peer, answer.why);
      link = ShmPeerLink{};
      return;
    }
    link.doorbell = std::move(answer.doorbell);
  }

  // ---- accepting the higher ranks that reached this one ----
  struct Inbound {
    UniqueFd fd;
    Clock::time_point give_up;
  };

  void accept_higher_ranks(std::set<int> expected) {
    std::vector<Inbound> inbound;
    std::vector<pollfd> fds;
    while (!expected.empty()) {
      if (deadline_.expired())
        fail(ErrorCode::Timeout,
             "rank {}: shared-memory set-up for comm {} timed out: ranks {} of this host never introduced "
             "themselves on its socket",
             rank_, options_.comm_id, fmt::join(expected, ", "));
      fds.assign(1, {listener_paused_ ? -1 : listener_.get(), POLLIN, 0});
      Deadline wake = deadline_;
      for (const Inbound& in : inbound) {
        fds.push_back({in.fd.get(), POLLIN, 0});
        wake = wake.earlier(Deadline(in.give_up));
      }
      if (::poll(fds.data(), fds.size(), wake.poll_timeout_ms()) < 0 && errno != EINTR) fail_errno("poll");
      for (std::size_t i = inbound.size(); i-- > 0;) {
        bool finished = fds[i + 1].revents != 0 && judge(inbound[i].fd, expected);
        if (!finished && Clock::now() >= inbound[i].give_up) {
          log::warn("rank {}: dropped a shared-memory connection: no complete hello within {} ms", rank_,
                    options_.handshake_timeout.count());
          finished = true;
        }
        if (finished) {
          inbound.erase(inbound.begin() + static_cast<std::ptrdiff_t>(i));
          listener_paused_ = false;  // a hello ended: accept() may work again
        }
      }
      if (fds[0].revents != 0) accept_pending(inbound);
    }
  }

  void accept_pending(std::vector<Inbound>& inbound) {
    for (;;) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        inbound.push_back({UniqueFd(fd), Clock::now() + options_.handshake_timeout});
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (out_of_descriptors(errno)) {
        // As over TCP (tcp_mesh.cpp): polling the listener now would spin; only a hello under way can end
        // and free a descriptor.
        const int err = errno;
        if (inbound.empty())
          fail_descriptor_call(fmt::format("rank {}: shared memory: accept() of this host's ranks", rank_),
                               err, need());
        listener_paused_ = true;
        return;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log::warn("rank {}: accept: {}", rank_, std::strerror(errno));
        std::this_thread::sleep_for(
            std::chrono::milliseconds(20));  // not a spin on a listener that stays ready
      }
      return;
    }
  }

  // Reads a hello and answers it; true when the connection is done with (taken or dropped).
  bool judge(UniqueFd& fd, std::set<int>& expected) {
    ShmHello heard =
        answer_shm_hello(me_, fd.get(), [&expected](int peer) { return expected.contains(peer); });
    if (heard.step == ShmHello::Step::NotYet) return false;
    if (heard.step == ShmHello::Step::Refused && heard.peer >= 0) expected.erase(heard.peer);
    if (heard.step != ShmHello::Step::Accepted) return true;
    expected.erase(heard.peer);
    if (heard.answer_error != 0) {
      // The peer introduced itself and left (it exited or failed): waiting on for it would only end at
      // the deadline. The network links carry its messages and say what became of it.
      log::warn(
          "rank {}: rank {} closed its shared-memory socket before the answer ({}): the network "
          "links carry their messages",
          rank_, heard.peer, std::strerror(heard.answer_error));
      return true;
    }
    peers_.links[heard.peer] = ShmPeerLink{std::move(fd), std::move(heard.doorbell)};
    return true;
  }

  Store& store_;
  const int rank_;
  const int size_;
  const ShmOptions& options_;
  const Deadline deadline_;
  ShmIntroduction me_;
  std::vector<int> members_;         // the ranks of this host, by the layout, this one among them
  std::vector<int> lower_, higher_;  // the others
  UniqueFd listener_;
  std::string listener_name_;
  bool listener_paused_ = false;  // out of descriptors: not polled until a hello under way ends
  std::set<int> first_use_;       // with the records: the pairs whose links the dialer makes
  ShmPeers peers_;
};

}  // namespace

std::string why_no_agreement(Store& store, const std::vector<std::string>& keys, int gatherer) {
  try {
    store.get_many(keys, Duration(1));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout)
      return fmt::format(
          "rank {}, which gathers what every rank publishes, never answered (nor could the "
          "store say who is missing: {})",
          gatherer, e.what());
    return fmt::format("rank {} gathers what every rank publishes, and not every rank did: {}", gatherer,
                       e.what());
  }
  return fmt::format("every rank published its part, but rank {}, which gathers them, never answered",
                     gatherer);
}

ShmPeers connect_shm_peers(Store& store, int rank, int size, const ShmOptions& options) {
  return ShmPeersBuilder(store, rank, size, options).build();
}

}  // namespace canopy::transport
