#include "transport/tcp/tcp_connector.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "rendezvous/client_socket.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/tcp_address_book.hpp"

namespace canopy::transport {
namespace {

using std::chrono::duration_cast;

// After a failed attempt a dial waits this long before the next: a peer's listener that is being set up,
// a connection reset by a loaded machine.
constexpr auto kRetryPause = std::chrono::milliseconds(20);
// A peer that has not published its address yet is looked up again after a pause that doubles up to
// this: a late rank costs the store a few requests, not one every 20 ms from everyone waiting for it.
constexpr auto kLongestLookupPause = std::chrono::milliseconds(320);
// How long one lookup waits for the key: a published address is there at once.
constexpr auto kLookupWait = std::chrono::milliseconds(1);

long long millis(Duration d) {
  return d.count();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

// An ack saying that the peer's listener has no such mesh (yet); false for any other, or garbage.
bool answers_not_yet(std::span<const std::byte, kAckSize> bytes) {
  try {
    return decode_ack(bytes).status == AckStatus::NoSuchMesh;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

struct TcpConnector::Dial {
  enum class Stage { Resolving, Waiting, Connecting, Greeting, Hearing };
  int peer = -1;
  std::optional<SocketAddress> address;  // read from the store at the first attempt
  Clock::time_point give_up;
  Clock::time_point retry_at;  // Waiting: the next attempt starts then
  Stage stage = Stage::Resolving;
  Clock::duration pause = kRetryPause;  // while resolving: doubles up to kLongestLookupPause
  UniqueFd fd;
  std::vector<std::byte> hello;
  std::size_t hello_sent = 0;
  std::array<std::byte, kAckSize> ack{};
  std::size_t ack_received = 0;
  std::string problem = "no attempt finished";
};

struct TcpConnector::Inbound {
  UniqueFd fd;
  std::string address;
  Clock::time_point give_up;
  Hello hello;
  std::array<std::byte, kAckSize> ack{};
  std::size_t ack_sent = 0;
  AckStatus status = AckStatus::Accepted;
};

TcpConnector::TcpConnector(std::shared_ptr<Store> store, int rank, int size, const TcpOptions& options)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      options_(options),
      requested_(static_cast<std::size_t>(size), false),
      connected_(static_cast<std::size_t>(size), false) {
  if (size == 1) return;
  if (options_.address_book) {
    // Made before the rank's record, which holds its address, was published.
    mesh_ = options_.address_book_mesh;
    listener_ = options_.address_book->listener()->attach(options_.comm_id, mesh_, need());
    address_ = listener_->address();
    return;
  }
  InterfaceAddress chosen =
      choose_interface(list_interfaces(), options_.socket_ifname, options_.socket_family);
  // The backlog holds every peer that may dial at once: the kernel completes their connects while this
  // rank computes, and drive() answers them on its next call.
  UniqueFd listening = listen_on(chosen.address, size_ + 64, need());
  address_ = SocketAddress::local_of(listening.get()).to_string();
  listener_ = TcpListener::make(rank_, std::move(listening), address_, options_.handshake_timeout)
                  ->attach(options_.comm_id, 0, need());
  log::info("rank {}: listening on {} (interface {}{}) for comm {}", rank_, address_, chosen.name,
            options_.socket_ifname.empty() ? ", the default choice" : ", from CANOPY_SOCKET_IFNAME",
            options_.comm_id);
  store_->set(tcp_address_key(options_.comm_id, rank_), address_);
}

TcpConnector::~TcpConnector() = default;

std::string TcpConnector::need() const {
  return tcp_descriptor_need(rank_, size_, options_.address_book ? options_.address_book->meshes() : 1,
                             options_.comm_id);
}

std::vector<int> TcpConnector::awaited() const {
  std::vector<int> ranks;
  for (int peer = rank_ + 1; peer < size_; ++peer)
    if (requested_[peer] && !connected_[peer]) ranks.push_back(peer);
  return ranks;
}

bool TcpConnector::resolve(Dial& dial) {
  TcpAddressBook* book = options_.address_book.get();
  const std::string key = book ? book->key_of(dial.peer) : tcp_address_key(options_.comm_id, dial.peer);
  if (book) {
    // Usually read already, with the other dials' (drive()) or by the other mesh.
    std::optional<std::string> address = book->address_of(dial.peer);
    if (!address && book->read({dial.peer}, kLookupWait)) address = book->address_of(dial.peer);
    if (address) {
      dial.address = SocketAddress::parse(*address);
      return true;
    }
  } else {
    try {
      dial.address = SocketAddress::parse(store_->get(key, kLookupWait));
      return true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
    }
  }
  dial.problem = fmt::format(
      "rank {} never published its address (store key '{}'); is it running, with the "
      "same store and world size {}?",
      dial.peer, key, size_);
  dial.retry_at = Clock::now() + dial.pause;
  dial.pause = std::min<Clock::duration>(dial.pause * 2, kLongestLookupPause);
  return false;
}

void TcpConnector::expect(const std::vector<int>& peers) {
  if (!options_.address_book) return;
  std::vector<int> dialled;
  for (int peer : peers)
    if (peer < rank_) dialled.push_back(peer);  // the higher peers dial this rank
  if (dialled.empty()) return;
  try {
    options_.address_book->read(dialled, kLookupWait);
  } catch (const Error& e) {
    // A hint only: the dials read again, and fail the peers' operations with what went wrong.
    log::debug("rank {}: reading the records of ranks {} ahead of their dials: {}", rank_, rank_list(dialled),
               e.what());
  }
}

void TcpConnector::request(int peer) {
  if (peer == rank_ || requested_[peer]) return;
  requested_[peer] = true;
  if (peer > rank_) return;  // it dials us
  auto dial = std::make_unique<Dial>();
  dial->peer = peer;
  dial->give_up = Clock::now() + options_.connect_timeout;
  dial->retry_at = Clock::now();
  Hello hello;
  hello.comm_id = options_.comm_id;
  hello.rank = static_cast<std::uint32_t>(rank_);
  hello.size = static_cast<std::uint32_t>(size_);
  hello.mesh = static_cast<std::uint8_t>(mesh_);
  dial->hello = encode_hello(hello, options_.job_token);
  dials_.push_back(std::move(dial));
}

// ---- dialling a lower rank ----

void TcpConnector::retry_later(Dial& dial, std::string problem) {
  log::debug("rank {}: connecting to rank {} at {}: {}; retrying", rank_, dial.peer,
             dial.address->to_string(), problem);
  dial.problem = std::move(problem);
  dial.fd.reset();
  dial.stage = Dial::Stage::Waiting;
  dial.hello_sent = dial.ack_received = 0;
  dial.retry_at = Clock::now() + kRetryPause;
}

std::optional<Error> TcpConnector::judge_ack(const Dial& dial,
                                             std::span<const std::byte, kAckSize> bytes) const {
  const std::string where = dial.address->to_string();
  Ack ack;
  try {
    ack = decode_ack(bytes);
  } catch (const Error& e) {
    return Error(
        ErrorCode::Protocol,
        fmt::format("rank {}: the address published for rank {} ({}) answered with something that is "
                    "not a Canopy handshake: {}",
                    rank_, dial.peer, where, e.what()));
  }
  if (ack.status != AckStatus::Accepted)
    return Error(
        ack.status == AckStatus::WrongToken ? ErrorCode::Config : ErrorCode::Protocol,
        fmt::format(
            "rank {}: rank {} ({}) refused the connection for comm {}: {}{}", rank_, dial.peer, where,
            options_.comm_id, to_string(ack.status),
            ack.status == AckStatus::WrongToken ? " (every rank must have the same CANOPY_JOB_TOKEN)" : ""));
  if (ack.rank != static_cast<std::uint32_t>(dial.peer) || ack.comm_id != options_.comm_id)
    return Error(ErrorCode::Protocol,
                 fmt::format("rank {}: the address published for rank {} of comm {} ({}) answered as rank {} "
                             "of comm {}: stale keys from an earlier round in the store?",
                             rank_, dial.peer, options_.comm_id, where, ack.rank, ack.comm_id));
  return std::nullopt;
}

bool TcpConnector::advance(Dial& dial, Outcome& outcome) {
  for (;;) {
    if (Clock::now() >= dial.give_up) {
      outcome.failure = Error(
          ErrorCode::Timeout,
          dial.address
              ? fmt::format("rank {}: TCP mesh set-up for comm {} timed out after {} ms: never connected "
                            "with rank {} at {} (last problem: {})",
                            rank_, options_.comm_id, millis(options_.connect_timeout), dial.peer,
                            dial.address->to_string(), dial.problem)
              : fmt::format("rank {}: TCP mesh set-up for comm {} timed out after {} ms: {}", rank_,
                            options_.comm_id, millis(options_.connect_timeout), dial.problem));
      return true;
    }
    switch (dial.stage) {
      case Dial::Stage::Resolving:
        if (Clock::now() < dial.retry_at || !resolve(dial)) return false;
        dial.stage = Dial::Stage::Waiting;
        continue;
      case Dial::Stage::Waiting: {
        if (Clock::now() < dial.retry_at) return false;
        int error = 0;
        dial.fd = start_connect(*dial.address, error, need());
        if (error != 0 && error != EINPROGRESS) {
          retry_later(dial, fmt::format("connect: {}", std::strerror(error)));
          return false;
        }
        dial.stage = Dial::Stage::Connecting;  // done or not, its end is judged there alone
        continue;
      }
      case Dial::Stage::Connecting: {
        pollfd p{dial.fd.get(), POLLOUT, 0};
        if (::poll(&p, 1, 0) <= 0) return false;
        int error = 0;
        socklen_t length = sizeof(error);
        ::getsockopt(dial.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
          retry_later(dial, fmt::format("connect: {}", std::strerror(error)));
          return false;
        }
        // A dead peer's port on this host may be given to the dial as its own source: TCP's simultaneous
        // open then joins the socket to itself, and it would read its own hello back as the answer.
        if (rendezvous::connected_to_itself(dial.fd.get())) {
          retry_later(dial, "connected to itself (nothing listens there)");
          return false;
        }
        dial.stage = Dial::Stage::Greeting;
        continue;
      }
      case Dial::Stage::Greeting: {
        ssize_t n = ::send(dial.fd.get(), dial.hello.data() + dial.hello_sent,
                           dial.hello.size() - dial.hello_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block(errno)) return false;
        if (n < 0) {
          retry_later(dial, fmt::format("sending the handshake: {}", std::strerror(errno)));
          return false;
        }
        dial.hello_sent += static_cast<std::size_t>(n);
        if (dial.hello_sent == dial.hello.size()) dial.stage = Dial::Stage::Hearing;
        continue;
      }
      case Dial::Stage::Hearing: {
        ssize_t n = ::recv(dial.fd.get(), dial.ack.data() + dial.ack_received, kAckSize - dial.ack_received,
                           MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block(errno)) return false;
        if (n <= 0) {
          retry_later(dial, n == 0 ? std::string("the peer closed the connection during the handshake")
                                   : fmt::format("receiving the handshake answer: {}", std::strerror(errno)));
          return false;
        }
        dial.ack_received += static_cast<std::size_t>(n);
        if (dial.ack_received < kAckSize) continue;
        if (answers_not_yet(dial.ack)) {
          // The peer has not formed this mesh yet (a group it forms after this rank did): as a refused
          // connect.
          retry_later(dial, fmt::format("rank {} has formed no mesh {} of comm {} (yet)", dial.peer, mesh_,
                                        options_.comm_id));
          return false;
        }
        outcome.failure = judge_ack(dial, dial.ack);
        if (!outcome.failure) {
          configure_data_socket(dial.fd.get());
          outcome.link = PeerLink{std::move(dial.fd), dial.address->to_string()};
        }
        return true;
      }
    }
  }
}

// ---- accepting higher ranks ----

void TcpConnector::answer(TcpListener::Greeted greeted) {
  auto in = std::make_unique<Inbound>();
  in->fd = std::move(greeted.fd);
  in->address = std::move(greeted.address);
  in->give_up = Clock::now() + options_.handshake_timeout;
  in->hello = greeted.hello;
  in->status = judge(in->hello, greeted.token);
  in->ack = encode_ack(
      Ack{.status = in->status, .comm_id = options_.comm_id, .rank = static_cast<std::uint32_t>(rank_)});
  inbound_.push_back(std::move(in));
}

AckStatus TcpConnector::judge(const Hello& hello, std::string_view token) const {
  if (!tokens_equal(token, options_.job_token)) return AckStatus::WrongToken;
  if (hello.comm_id != options_.comm_id) return AckStatus::WrongComm;
  if (hello.size != static_cast<std::uint32_t>(size_) || hello.rank <= static_cast<std::uint32_t>(rank_) ||
      hello.rank >= static_cast<std::uint32_t>(size_))
    return AckStatus::BadRank;
  if (connected_[hello.rank]) return AckStatus::Duplicate;
  return AckStatus::Accepted;
}

TcpConnector::Step TcpConnector::send_answer(Inbound& in) {
  while (in.ack_sent < kAckSize) {
    ssize_t n =
        ::send(in.fd.get(), in.ack.data() + in.ack_sent, kAckSize - in.ack_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      in.ack_sent += static_cast<std::size_t>(n);
    } else if (would_block(errno)) {
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
  return Step::Done;
}

// ---- driving ----

// The records of every peer about to be dialled, in one store request: the dials a call (or an eager mesh)
// starts at once cost one round trip, not one each.
void TcpConnector::read_addresses() {
  std::vector<int> peers;
  Clock::time_point now{};
  for (const auto& dial : dials_) {
    if (dial->stage != Dial::Stage::Resolving) continue;
    if (now == Clock::time_point{}) now = Clock::now();
    if (now >= dial->retry_at) peers.push_back(dial->peer);
  }
  if (peers.size() > 1) options_.address_book->read(peers, kLookupWait);
}

void TcpConnector::drive(std::vector<Outcome>& outcomes) {
  if (options_.address_book && !dials_.empty()) read_addresses();
  for (std::size_t i = 0; i < dials_.size();) {
    Outcome outcome;
    outcome.peer = dials_[i]->peer;
    if (!advance(*dials_[i], outcome)) {
      ++i;
      continue;
    }
    if (!outcome.failure) connected_[outcome.peer] = true;
    outcomes.push_back(std::move(outcome));
    dials_.erase(dials_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  greeted_.clear();
  if (listener_) listener_->drive(greeted_);
  for (auto& greeted : greeted_) answer(std::move(greeted));
  // No clock read while nothing is under way: drive() runs on every pass of the data path.
  const auto now = inbound_.empty() ? Clock::time_point() : Clock::now();
  for (std::size_t i = 0; i < inbound_.size();) {
    Inbound& in = *inbound_[i];
    Step step = send_answer(in);
    if (step == Step::Continue && now >= in.give_up) {
      log::warn(
          "rank {}: dropped a connection from {}: its handshake's answer could not be sent within {} ms",
          rank_, in.address, millis(options_.handshake_timeout));
      step = Step::Drop;
    }
    if (step == Step::Continue) {
      ++i;
      continue;
    }
    if (step == Step::Done) {
      const int peer = static_cast<int>(in.hello.rank);
      connected_[peer] = true;
      configure_data_socket(in.fd.get());
      outcomes.push_back(
          Outcome{.peer = peer, .link = PeerLink{std::move(in.fd), in.address}, .failure = {}});
    }
    inbound_.erase(inbound_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void TcpConnector::prepare_to_block(std::vector<pollfd>& fds, Clock::time_point& wake_by) {
  const std::size_t before = fds.size();
  if (listener_) listener_->prepare_to_block(fds, wake_by);
  listener_polls_ = fds.size() - before;
  for (const auto& in : inbound_) {
    fds.push_back({in->fd.get(), POLLOUT, 0});
    wake_by = std::min(wake_by, in->give_up);
  }
  for (const auto& dial : dials_) {
    wake_by = std::min(wake_by, dial->give_up);
    switch (dial->stage) {
      case Dial::Stage::Resolving:
      case Dial::Stage::Waiting:
        wake_by = std::min(wake_by, dial->retry_at);
        break;
      case Dial::Stage::Connecting:
      case Dial::Stage::Greeting:
        fds.push_back({dial->fd.get(), POLLOUT, 0});
        break;
      case Dial::Stage::Hearing:
        fds.push_back({dial->fd.get(), POLLIN, 0});
        break;
    }
  }
}

void TcpConnector::after_poll(std::span<const pollfd> fds) {
  if (listener_) listener_->after_poll(fds.first(std::min(listener_polls_, fds.size())));
}

}  // namespace canopy::transport
