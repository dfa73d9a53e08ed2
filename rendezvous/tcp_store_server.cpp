// The TcpStore server: one Asio io_context on one thread of its own serves every client with
// asynchronous accept, read and write (no thread per client). GET and WAIT wait here, on the
// server, in a waiter list per key, so that clients never poll; each connection may park several
// such requests at once and is answered as each completes (replies carry their request's id).
#include <algorithm>
#include <array>
#include <asio.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "common/token.hpp"
#include "rendezvous/key_value_table.hpp"
#include "rendezvous/printable.hpp"
#include "rendezvous/store_acceptor.hpp"
#include "rendezvous/store_protocol.hpp"

namespace canopy {
namespace {

namespace proto = rendezvous::protocol;
using asio::ip::tcp;
using rendezvous::printable;

// A connection that has not presented its hello by then is a stray (a port scanner, a stuck peer).
constexpr auto kHelloTimeout = std::chrono::seconds(30);
// Replies not yet written past which a connection's next requests wait to be handled (its client is not
// reading them); the connection keeps reading meanwhile, to notice the client leaving, up to
// kMaxBufferedWhileBusy of those requests.
constexpr std::size_t kMaxQueuedReplyBytes = 1 << 20;
constexpr std::size_t kMaxBufferedWhileBusy = 1 << 20;
// Every session reads into the server's one buffer of this size and keeps only the bytes of requests not
// yet handled: an idle connection (a bootstrap's 16,384 of them) holds no read buffer at all.
constexpr std::size_t kReadChunk = 64 * 1024;
// Reads in a row on one connection before the others get a turn (a 64 MiB value arriving).
constexpr int kReadsPerTurn = 16;
// An emptied input buffer larger than this is given back: one big SET must not pin its size for the
// connection's life.
constexpr std::size_t kKeptInputBytes = 4 * 1024;
// Waits longer than this are cut to it, so that a u64 from the wire never overflows the clock.
constexpr std::uint64_t kMaxWaitMs = 365ull * 24 * 3600 * 1000;
// How long a server being destroyed waits for the replies it made to be written (a client that stopped
// reading would hold it forever).
constexpr auto kFlushLimit = std::chrono::milliseconds(500);

class Session;

// A GET / WAIT / GET_MANY parked until its keys exist or its own timer fires. The per-key waiter lists
// hold it, not its session, so that one connection can wait for several things at once.
struct PendingWait {
  PendingWait(const asio::any_io_executor& executor, std::weak_ptr<Session> owner, proto::Request r)
      : timer(executor), session(std::move(owner)), request(std::move(r)) {}

  asio::steady_timer timer;
  std::weak_ptr<Session> session;
  proto::Request request;
  std::size_t key_bytes = 0;   // what it counts against its connection's kMaxPendingKeyBytesPerConnection
  std::string registered_key;  // the key whose waiter list holds it
  std::size_t ready = 0;       // its keys before this one existed when last looked at
  bool done = false;           // answered, or its session closed
};

// What every session shares: the table, the waiters, the set of live sessions. Touched only from the
// io_context's thread.
struct ServerState {
  std::uint16_t port = 0;
  std::string token;
  rendezvous::KeyValueTable table;
  std::unordered_map<std::string, std::vector<std::shared_ptr<PendingWait>>> waiters;
  std::unordered_map<Session*, std::shared_ptr<Session>> sessions;
  std::vector<char> read_buffer = std::vector<char>(kReadChunk);  // one thread: one reader at a time

  void notify(const std::string& key);
  void unregister_waiter(const std::string& key, const PendingWait* wait);
};

// One reply: its own bytes, then for a GET the value's buffer, shared with the table and the other readers.
struct Outgoing {
  std::string head;
  std::shared_ptr<const std::string> value;

  std::size_t size() const { return head.size() + (value ? value->size() : 0); }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerState& server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)), timer_(socket_.get_executor()) {
    std::error_code ec;
    auto endpoint = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("an unknown peer")
               : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);  // maybe_read's read_some must return would_block, never wait
  }

  void start() {
    arm_hello_timer();
    maybe_read();
  }

  // Whether replies it made are still on their way out (the last write's handler has not run yet).
  bool writing() const { return writing_; }

  // Ends the connection and frees every wait it parked (their timers and waiter entries); safe to call twice.
  void close() {
    if (closed_) return;
    closed_ = true;
    for (auto& [id, wait] : waits_) {
      wait->done = true;
      server_.unregister_waiter(wait->registered_key, wait.get());
      wait->timer.cancel();
    }
    waits_.clear();
    pending_key_bytes_ = 0;
    ++timer_generation_;
    timer_.cancel();
    std::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    server_.sessions.erase(this);  // may drop the last owner but one: callers hold shared_from_this()
  }

  // A key `wait` waits on was written: done, or wait for the next missing key. Keys before `ready`
  // existed when last looked at, so a wait for P keys that arrive one by one (rank 0 gathering a job)
  // costs O(P) look-ups, not O(P^2); one full pass at the end catches a key removed meanwhile.
  void recheck(const std::shared_ptr<PendingWait>& wait) {
    if (closed_ || wait->done) return;
    const auto& keys = wait->request.keys;
    for (;;) {
      while (wait->ready < keys.size() && server_.table.find(keys[wait->ready])) ++wait->ready;
      if (wait->ready < keys.size()) {
        wait->registered_key = keys[wait->ready];
        server_.waiters[wait->registered_key].push_back(wait);
        return;
      }
      const std::string* missing = server_.table.first_missing(keys);
      if (!missing) break;
      wait->ready = static_cast<std::size_t>(missing - keys.data());
    }
    finish(*wait);
    const auto& done = wait->request;
    if (done.command == Command::Get) {
      reply_value(done.id, server_.table.share(done.keys.front()));
    } else if (done.command == Command::GetMany) {
      reply(values_of(done.id, done.keys));
    } else {
      reply(proto::encode_ok(done.id));
    }
  }

  // `wait`'s own timer fired before its keys all existed.
  void expire(const std::shared_ptr<PendingWait>& wait) {
    if (closed_ || wait->done) return;
    server_.unregister_waiter(wait->registered_key, wait.get());
    finish(*wait);
    std::vector<std::string> missing;
    for (const auto& k : wait->request.keys)
      if (!server_.table.find(k)) missing.push_back(k);
    auto waited = std::min(wait->request.timeout_ms, kMaxWaitMs);
    reply(proto::encode_failure(
        wait->request.id, proto::Status::Timeout,
        fmt::format("after {} ms still missing: {}", waited, rendezvous::printable_list(missing))));
  }

 private:
  using Command = proto::Command;

  void arm_hello_timer() {
    auto generation = ++timer_generation_;
    timer_.expires_after(kHelloTimeout);
    timer_.async_wait([self = shared_from_this(), generation](const std::error_code& ec) {
      if (ec || self->closed_ || generation != self->timer_generation_) return;
      log::warn("TcpStore :{}: closing the connection from {}: no hello within {} s", self->server_.port,
                self->peer_, std::chrono::duration_cast<std::chrono::seconds>(kHelloTimeout).count());
      self->close();
    });
  }

  std::size_t buffered() const { return inbuf_.size() - consumed_; }
  // The client is not reading its replies: its next requests wait.
  bool overloaded() const { return queued_bytes_ > kMaxQueuedReplyBytes; }

  // GET_MANY's reply once every key exists, or an ERROR when the values together exceed one reply's
  // limit (the connection stays usable: the client can ask for fewer keys at a time).
  std::string values_of(std::uint32_t id, const std::vector<std::string>& keys) const {
    std::vector<std::string_view> values;
    values.reserve(keys.size());
    std::size_t total = 0;
    for (const auto& key : keys) {
      values.emplace_back(*server_.table.find(key));
      total += values.back().size();
    }
    if (total > proto::kMaxGetManyValueBytes)
      return proto::encode_failure(
          id, proto::Status::Error,
          fmt::format(
              "the values of these {} keys total {} bytes, over the limit of {} bytes for one GET_MANY "
              "reply: ask for fewer keys at a time",
              keys.size(), total, proto::kMaxGetManyValueBytes));
    return proto::encode_ok_values(id, values);
  }

  // Reads what has arrived into the server's buffer and handles it, and waits for more only once the
  // socket is drained: Asio's epoll is edge-triggered, so a wait begun while bytes sit unread may never end
  // (after a turn's reads, or a pause while overloaded). Reading goes on while the client is not reading
  // its replies, to notice it leaving, up to kMaxBufferedWhileBusy.
  void maybe_read() {
    if (reading_ || closed_) return;
    for (int turn = 0; turn < kReadsPerTurn; ++turn) {
      if (overloaded() && buffered() >= kMaxBufferedWhileBusy) return;  // write_next's handler reads on
      std::error_code ec;
      std::size_t n = socket_.read_some(asio::buffer(server_.read_buffer), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) return wait_readable();
      if (ec == asio::error::interrupted) continue;
      if (ec) {
        if (ec != asio::error::eof)
          log::debug("TcpStore :{}: connection from {} ended: {}", server_.port, peer_, ec.message());
        return close();
      }
      inbuf_.append(server_.read_buffer.data(), n);
      process();
      if (closed_) return;
    }
    reading_ = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->reading_ = false;
      self->maybe_read();
    });
  }

  void wait_readable() {
    reading_ = true;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const std::error_code& ec) {
      self->reading_ = false;
      if (self->closed_) return;
      if (ec) {
        if (ec != asio::error::operation_aborted)
          log::debug("TcpStore :{}: connection from {} ended: {}", self->server_.port, self->peer_,
                     ec.message());
        return self->close();
      }
      self->maybe_read();
    });
  }

  // Handles each request that has fully arrived as it arrives: one that waits for keys is parked and the
  // next is handled at once. Stops while the client leaves too many replies unread.
  void process() {
    try {
      while (!closed_ && !close_after_write_ && !overloaded()) {
        std::string_view rest(inbuf_.data() + consumed_, buffered());
        if (!authenticated_) {
          if (!process_hello(rest)) break;
          continue;
        }
        proto::Request request;
        auto parsed = proto::parse_request(rest, request);
        if (parsed.kind == proto::ParseResult::Kind::Incomplete) break;
        if (parsed.kind == proto::ParseResult::Kind::Malformed) {
          reject_request(parsed.id, parsed.error);
          break;
        }
        consumed_ += parsed.consumed;
        handle(std::move(request));
      }
      compact();
    } catch (const std::exception& e) {
      // std::bad_alloc or a bug: this connection ends, the server and the other clients go on.
      log::error("TcpStore :{}: dropping the connection from {}: {}", server_.port, peer_, e.what());
      close();
    }
  }

  // An ERROR reply, then the connection closes: after a malformed request the stream cannot be trusted.
  void reject_request(std::uint32_t id, const std::string& why) {
    log::warn("TcpStore :{}: malformed request from {}: {}; closing the connection", server_.port, peer_,
              why);
    reply(proto::encode_failure(id, proto::Status::Error, "malformed request: " + why));
    close_after_write_ = true;
  }

  void compact() {
    if (consumed_ == 0) return;
    inbuf_.erase(0, consumed_);
    consumed_ = 0;
    if (inbuf_.empty() && inbuf_.capacity() > kKeptInputBytes) std::string().swap(inbuf_);
  }

  // Returns false while the hello is incomplete.
  bool process_hello(std::string_view rest) {
    const proto::HelloParse hello = proto::parse_hello(rest);
    if (hello.kind == proto::ParseResult::Kind::Malformed) reject(hello.error);
    if (hello.kind != proto::ParseResult::Kind::Complete) return false;
    consumed_ += hello.consumed;
    if (hello.version != proto::kVersion) {
      log::warn(
          "TcpStore :{}: rejected the connection from {}: it speaks store protocol version {}, this server "
          "{} (every rank and the launcher of a job must run the same Canopy release)",
          server_.port, peer_, hello.version, proto::kVersion);
      close_after_write_ = true;
      reply(std::string(1, static_cast<char>(proto::HelloStatus::BadVersion)));
      return false;
    }
    if (!tokens_equal(hello.token, server_.token)) {
      log::warn("TcpStore :{}: rejected the connection from {}: wrong job token", server_.port, peer_);
      close_after_write_ = true;
      reply(std::string(1, static_cast<char>(proto::HelloStatus::BadToken)));
      return false;
    }
    authenticated_ = true;
    ++timer_generation_;
    timer_.cancel();
    reply(std::string(1, static_cast<char>(proto::HelloStatus::Ok)));
    return true;
  }

  void reject(const std::string& why) {
    log::warn("TcpStore :{}: rejected the connection from {}: {}", server_.port, peer_, why);
    close();
  }

  void handle(proto::Request request) {
    auto& table = server_.table;
    const std::uint32_t id = request.id;
    const std::string& key = request.keys.empty() ? empty_ : request.keys.front();
    switch (request.command) {
      case Command::Set:
        table.set(key, request.value);
        reply(proto::encode_ok(id));
        server_.notify(key);
        return;
      case Command::Get:
        if (auto value = table.share(key)) return reply_value(id, std::move(value));
        return begin_wait(std::move(request));
      case Command::Add: {
        std::int64_t sum = 0;
        try {
          sum = table.add(key, request.delta);
        } catch (const Error& e) {
          return reply(proto::encode_failure(id, proto::Status::Error, e.what()));
        }
        reply(proto::encode_ok_i64(id, sum));
        server_.notify(key);
        return;
      }
      case Command::CompareSet: {
        bool changed = false;
        std::string after = table.compare_set(key, request.value, request.desired, changed);
        reply(proto::encode_ok_bytes(id, after));
        if (changed) server_.notify(key);
        return;
      }
      case Command::Check:
        return reply(proto::encode_ok_flag(id, table.first_missing(request.keys) == nullptr));
      case Command::Wait:
        if (!table.first_missing(request.keys)) return reply(proto::encode_ok(id));
        return begin_wait(std::move(request));
      case Command::GetMany:
        if (!table.first_missing(request.keys)) return reply(values_of(id, request.keys));
        return begin_wait(std::move(request));
      case Command::Delete:
        return reply(proto::encode_ok_flag(id, table.remove(key)));
      case Command::Ping:
        return reply(proto::encode_ok(id));
    }
  }

  // Parks a request whose keys do not all exist yet, within this connection's bounds.
  void begin_wait(proto::Request request) {
    const std::uint32_t id = request.id;
    if (waits_.count(id)) {
      return reject_request(id, fmt::format("request id {} reused while its {} still waits", id,
                                            proto::to_string(request.command)));
    }
    std::size_t key_bytes = 0;
    for (const auto& k : request.keys) key_bytes += k.size();
    if (waits_.size() >= proto::kMaxPendingWaitsPerConnection ||
        pending_key_bytes_ + key_bytes > proto::kMaxPendingKeyBytesPerConnection) {
      return reply(proto::encode_failure(
          id, proto::Status::Error,
          fmt::format("{} not parked: this connection already has {} requests waiting for keys ({} bytes of "
                      "keys); one connection may park at most {} ({} bytes): wait for some to finish",
                      proto::to_string(request.command), waits_.size(), pending_key_bytes_,
                      proto::kMaxPendingWaitsPerConnection, proto::kMaxPendingKeyBytesPerConnection)));
    }
    auto timeout = std::chrono::milliseconds(std::min(request.timeout_ms, kMaxWaitMs));
    auto wait = std::make_shared<PendingWait>(socket_.get_executor(), weak_from_this(), std::move(request));
    wait->key_bytes = key_bytes;
    waits_.emplace(id, wait);
    pending_key_bytes_ += key_bytes;
    wait->timer.expires_after(timeout);
    wait->timer.async_wait([wait](const std::error_code& ec) {
      if (ec || wait->done) return;
      if (auto session = wait->session.lock()) session->expire(wait);
    });
    recheck(wait);
  }

  // Takes an answered wait off this session's books; its reply is the caller's to send.
  void finish(PendingWait& wait) {
    wait.done = true;
    wait.timer.cancel();
    pending_key_bytes_ -= wait.key_bytes;
    waits_.erase(wait.request.id);
  }

  void reply(std::string bytes) { send(Outgoing{std::move(bytes), nullptr}); }

  // A GET's reply: the header here, the value read from the table's buffer as it is written.
  void reply_value(std::uint32_t id, std::shared_ptr<const std::string> value) {
    send(Outgoing{proto::encode_ok_bytes_head(id, value->size()), std::move(value)});
  }

  // Replies go out one async_write at a time, in the order they were made.
  void send(Outgoing outgoing) {
    if (closed_) return;
    queued_bytes_ += outgoing.size();
    queue_.push_back(std::move(outgoing));
    if (!writing_) write_next();
  }

  void write_next() {
    writing_ = true;
    const Outgoing& front = queue_.front();  // a deque's push_back leaves it in place
    std::array<asio::const_buffer, 2> buffers{
        asio::buffer(front.head), front.value ? asio::buffer(*front.value) : asio::const_buffer()};
    asio::async_write(socket_, buffers, [self = shared_from_this()](const std::error_code& ec, std::size_t) {
      if (self->closed_) return;
      if (ec) return self->close();
      self->queued_bytes_ -= self->queue_.front().size();
      self->queue_.pop_front();
      if (!self->queue_.empty()) return self->write_next();
      self->writing_ = false;
      if (self->close_after_write_) return self->close();
      self->process();
      self->maybe_read();
    });
  }

  ServerState& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;  // the hello's
  std::uint64_t timer_generation_ = 0;
  std::string peer_;
  std::string inbuf_;  // the bytes of requests not yet handled
  std::size_t consumed_ = 0;
  std::deque<Outgoing> queue_;  // the front one is being written
  std::size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool authenticated_ = false;
  bool reading_ = false;
  bool closed_ = false;
  bool close_after_write_ = false;
  std::unordered_map<std::uint32_t, std::shared_ptr<PendingWait>> waits_;  // by request id
  std::size_t pending_key_bytes_ = 0;                                      // waits_' keys together
  const std::string empty_;
};

void ServerState::notify(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  auto woken = std::move(it->second);
  waiters.erase(it);
  for (auto& wait : woken) {
    if (wait->done) continue;
    if (auto session = wait->session.lock()) session->recheck(wait);
  }
}

void ServerState::unregister_waiter(const std::string& key, const PendingWait* wait) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  auto& list = it->second;
  list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& w) { return w.get() == wait; }),
             list.end());
  if (list.empty()) waiters.erase(it);
}

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(const std::string& host, std::uint16_t port, std::string job_token)
      : acceptor_(rendezvous::open_store_acceptor(io_, host, port)), retry_timer_(io_) {
    state_.port = acceptor_.local_endpoint().port();
    state_.token = std::move(job_token);
    accept_next();
    thread_ = std::thread([this] { run(); });
    log::info("TcpStore: serving on {}:{}", host.empty() ? "*" : host, state_.port);
  }

  ~Impl() {
    // The loop stops once every reply already made is written: a client whose last request was handled
    // (the SET that let this server's owner go on to destroy it) gets its answer, not the close.
    asio::post(io_, [this] {
      std::error_code ignored;
      acceptor_.close(ignored);
      retry_timer_.cancel();
      stop_once_written(Clock::now() + kFlushLimit);
    });
    thread_.join();
    // The loop is stopped: nothing else touches the state now. Closing each socket tells every client,
    // including those waiting for a key, that the store is gone.
    std::error_code ignored;
    acceptor_.close(ignored);
    auto sessions = std::move(state_.sessions);
    for (auto& [raw, session] : sessions) session->close();
    state_.waiters.clear();
  }

  std::uint16_t port() const { return state_.port; }

 private:
  void run() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        // Handlers catch their own errors; this is the last line so that nothing escapes the thread.
        log::error("TcpStore :{}: event loop error: {}", state_.port, e.what());
      }
    }
  }

  static std::string accept_problem(const std::error_code& ec) {
    if (ec.category() == std::system_category() && out_of_descriptors(ec.value()))
      return descriptor_limit_message("accept()", ec.value(), "the store holds a socket for each client");
    return "accept failed: " + ec.message();
  }

  // Stops the loop once no session has replies on their way, or at `give_up` (a client that does not read).
  void stop_once_written(Clock::time_point give_up) {
    const bool written = std::none_of(state_.sessions.begin(), state_.sessions.end(),
                                      [](const auto& entry) { return entry.second->writing(); });
    if (written || Clock::now() >= give_up) return io_.stop();
    flush_timer_.expires_after(std::chrono::milliseconds(1));
    flush_timer_.async_wait([this, give_up](const std::error_code&) { stop_once_written(give_up); });
  }

  void accept_next() {
    acceptor_.async_accept([this](const std::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // Out of file descriptors, most likely: back off instead of spinning, and say so once, not 20
        // times a second.
        if (!accept_failing_)
          log::warn("TcpStore :{}: {}; retrying every 50 ms", state_.port, accept_problem(ec));
        accept_failing_ = true;
        retry_timer_.expires_after(std::chrono::milliseconds(50));
        retry_timer_.async_wait([this](const std::error_code& wait_ec) {
          if (!wait_ec) accept_next();
        });
        return;
      }
      if (accept_failing_) log::info("TcpStore :{}: accepting connections again", state_.port);
      accept_failing_ = false;
      auto session = std::make_shared<Session>(state_, std::move(socket));
      state_.sessions.emplace(session.get(), session);
      session->start();
      accept_next();
    });
  }

  // Declared first so that it is destroyed last: pending handlers own sessions, whose sockets need it.
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::steady_timer flush_timer_{io_};  // while the destructor waits for the replies to go out
  bool accept_failing_ = false;  // since the last accept() that worked
  ServerState state_;
  std::thread thread_;
};

TcpStoreServer::TcpStoreServer(const std::string& host, std::uint16_t port, std::string job_token)
    : impl_(std::make_unique<Impl>(host, port, std::move(job_token))) {}

TcpStoreServer::~TcpStoreServer() = default;

std::uint16_t TcpStoreServer::port() const {
  return impl_->port();
}

}  // namespace canopy
