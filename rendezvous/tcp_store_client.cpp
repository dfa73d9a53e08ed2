// The TcpStore client: one blocking connection, one request at a time under a mutex. GET and WAIT
// wait on the server; the client's own deadline runs a little longer, to catch a dead server.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/store.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/client_socket.hpp"
#include "rendezvous/printable.hpp"
#include "rendezvous/store_protocol.hpp"
#include "rendezvous/store_wait.hpp"

namespace canopy {
namespace {

namespace proto = rendezvous::protocol;
using rendezvous::ClientSocket;
using rendezvous::printable;

// How much longer than the server-side wait the client waits for the reply before it calls the
// server dead.
constexpr Duration kReplyGrace = std::chrono::seconds(5);
// How long a server that closed our hello gets to accept a second connection (a live one does at once).
constexpr Duration kListeningProbe = std::chrono::milliseconds(300);
// A reply the server sent on purpose (TIMEOUT, ERROR): the connection stays usable.
class ServerAnswered : public Error {
 public:
  using Error::Error;
};

// Where a client connected, so that it can open a second connection to the same server.
struct ServerAddress {
  std::string host;
  std::uint16_t port = 0;
  std::string job_token;
};

std::shared_ptr<Store> connect_client(const ServerAddress& address, Duration connect_timeout);

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(ClientSocket socket, ServerAddress address)
      : socket_(std::move(socket)), address_(std::move(address)) {}
  ~TcpStoreClient() override {
    log::debug("TcpStore client of {}: {} requests sent", socket_.endpoint(), requests_sent_.load());
  }

  std::uint64_t requests_sent() const override { return requests_sent_.load(std::memory_order_relaxed); }

  // A connection of its own: its requests never queue behind this one's (a GET may wait minutes).
  std::shared_ptr<Store> open_another(Duration timeout) override {
    auto another = connect_client(address_, timeout);
    another->set_timeout(timeout);
    return another;
  }

  void set(std::string_view key, std::string_view value) override {
    check_key(key, "set");
    check_value(value, "set", "value");
    proto::Request request;
    request.command = proto::Command::Set;
    request.keys.emplace_back(key);
    request.value = value;
    call(request, operation_deadline(), fmt::format("set({})", printable(key)), [] {});
  }

  std::string get(std::string_view key, Duration timeout) override {
    check_key(key, "get");
    timeout = rendezvous::clamp_store_wait(timeout);
    proto::Request request;
    request.command = proto::Command::Get;
    request.keys.emplace_back(key);
    request.timeout_ms = static_cast<std::uint64_t>(timeout.count());
    return call(request, Deadline::after(timeout + kReplyGrace), fmt::format("get({})", printable(key)),
                [&] { return read_bytes(proto::kMaxValueBytes, request_deadline_); });
  }

  std::int64_t add(std::string_view key, std::int64_t delta) override {
    check_key(key, "add");
    proto::Request request;
    request.command = proto::Command::Add;
    request.keys.emplace_back(key);
    request.delta = delta;
    return call(request, operation_deadline(), fmt::format("add({}, {})", printable(key), delta), [&] {
      char bytes[8];
      socket_.receive_exact(bytes, sizeof(bytes), request_deadline_);
      return static_cast<std::int64_t>(proto::get_u64(bytes));
    });
  }

  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override {
    check_key(key, "compare_set");
    check_value(expected, "compare_set", "expected value");
    check_value(desired, "compare_set", "desired value");
    proto::Request request;
    request.command = proto::Command::CompareSet;
    request.keys.emplace_back(key);
    request.value = expected;
    request.desired = desired;
    return call(request, operation_deadline(), fmt::format("compare_set({})", printable(key)),
                [&] { return read_bytes(proto::kMaxValueBytes, request_deadline_); });
  }

  bool check(const std::vector<std::string>& keys) override {
    for (const auto& key : keys) check_key(key, "check");
    auto deadline = operation_deadline();
    for (std::size_t first = 0; first < keys.size(); first += proto::kMaxKeysPerRequest) {
      proto::Request request;
      request.command = proto::Command::Check;
      request.keys = slice(keys, first);
      bool all = call(request, deadline, fmt::format("check({})", rendezvous::printable_list(request.keys)),
                      [&] { return read_flag(); });
      if (!all) return false;
    }
    return true;
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    for (const auto& key : keys) check_key(key, "wait");
    timeout = rendezvous::clamp_store_wait(timeout);
    auto deadline = Deadline::after(timeout);
    // More keys than one request may carry: wait for them a batch at a time, within the one deadline.
    for (std::size_t first = 0; first < keys.size(); first += proto::kMaxKeysPerRequest) {
      proto::Request request;
      request.command = proto::Command::Wait;
      request.keys = slice(keys, first);
      auto left = std::chrono::duration_cast<Duration>(deadline.remaining());
      request.timeout_ms = static_cast<std::uint64_t>(left.count());
      call(request, Deadline::after(left + kReplyGrace),
           fmt::format("wait({})", rendezvous::printable_list(request.keys)), [] {});
    }
  }

  // One request for all the keys, unless they exceed what one GET_MANY may carry: then a batch at a time,
  // within the one deadline.
  std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) override {
    for (const auto& key : keys) check_key(key, "get_many");
    timeout = rendezvous::clamp_store_wait(timeout);
    auto deadline = Deadline::after(timeout);
    std::vector<std::string> values;
    values.reserve(keys.size());
    for (std::size_t first = 0; first < keys.size();) {
      std::size_t last = first, key_bytes = 0;
      while (last < keys.size() && last - first < proto::kMaxKeysPerGetMany &&
             key_bytes + keys[last].size() <= proto::kMaxGetManyKeyBytes)
        key_bytes += keys[last++].size();
      proto::Request request;
      request.command = proto::Command::GetMany;
      request.keys.assign(keys.begin() + static_cast<std::ptrdiff_t>(first),
                          keys.begin() + static_cast<std::ptrdiff_t>(last));
      auto left = std::chrono::duration_cast<Duration>(deadline.remaining());
      request.timeout_ms = static_cast<std::uint64_t>(left.count());
      call(request, Deadline::after(left + kReplyGrace),
           fmt::format("get_many({})", rendezvous::printable_list(request.keys)),
           [&] { read_values(request.keys.size(), values); });
      first = last;
    }
    return values;
  }

  bool remove(std::string_view key) override {
    check_key(key, "remove");
    proto::Request request;
    request.command = proto::Command::Delete;
    request.keys.emplace_back(key);
    return call(request, operation_deadline(), fmt::format("remove({})", printable(key)),
                [&] { return read_flag(); });
  }

  void hello(const std::string& token, Deadline deadline) {
    std::lock_guard lock(mutex_);
    socket_.send_all(proto::encode_hello(token), deadline);
    char status = 0;
    try {
      socket_.receive_exact(&status, 1, deadline);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::PeerFailed) throw;
      // Two servers close a hello: one that speaks another protocol, and one whose process is exiting (a
      // killed store). Only the first still accepts and keeps connections: one more tells them apart.
      if (!still_listening())
        fail(ErrorCode::PeerFailed,
             "the TcpStore at {} is unreachable: it closed the connection during the Canopy store hello and "
             "now refuses connections (did its process exit?): {}",
             socket_.endpoint(), e.what());
      fail(
          ErrorCode::Protocol,
          "the server at {} closed the connection during the Canopy store hello and still accepts "
          "connections: it is not a Canopy TcpStore (a PyTorch TCPStore, e.g. torchrun's agent store, speaks "
          "another protocol: point CANOPY_MASTER_PORT at a free port)",
          socket_.endpoint());
    }
    switch (static_cast<proto::HelloStatus>(status)) {
      case proto::HelloStatus::Ok:
        return;
      case proto::HelloStatus::BadToken:
        fail(ErrorCode::Config,
             "the TcpStore at {} rejected our job token: every rank of a job must have the same "
             "CANOPY_JOB_TOKEN "
             "(or the same job id it is derived from); is another job using this port?",
             socket_.endpoint());
      case proto::HelloStatus::BadVersion:
        fail(ErrorCode::Protocol, "the TcpStore at {} does not speak store protocol version {}",
             socket_.endpoint(), proto::kVersion);
    }
    fail(ErrorCode::Protocol, "the TcpStore at {} answered the hello with unknown status {}",
         socket_.endpoint(), static_cast<int>(static_cast<unsigned char>(status)));
  }

 private:
  // Whether the server still accepts a connection and keeps it. A killed store's listener can complete one
  // more handshake while its process exits, and then resets it: only a connection that stays open for a
  // moment (or is answered) shows a live server that speaks another protocol.
  bool still_listening() const {
    std::optional<ClientSocket> probe;
    try {
      probe.emplace(ClientSocket::connect(address_.host, address_.port, Deadline::after(kListeningProbe)));
    } catch (const Error&) {
      return false;
    }
    try {
      char byte = 0;
      probe->receive_exact(&byte, 1, Deadline::after(kListeningProbe));
      return true;
    } catch (const Error& e) {
      return e.code() == ErrorCode::Timeout;
    }
  }

  static std::vector<std::string> slice(const std::vector<std::string>& keys, std::size_t first) {
    auto last = std::min(keys.size(), first + proto::kMaxKeysPerRequest);
    return std::vector<std::string>(keys.begin() + static_cast<std::ptrdiff_t>(first),
                                    keys.begin() + static_cast<std::ptrdiff_t>(last));
  }

  static void check_key(std::string_view key, std::string_view call) {
    if (key.size() > proto::kMaxKeyBytes)
      fail(ErrorCode::InvalidArgument, "{}: a key of {} bytes exceeds the TcpStore limit of {} bytes ({})",
           call, key.size(), proto::kMaxKeyBytes, printable(key, 40));
  }

  static void check_value(std::string_view value, std::string_view call, std::string_view what) {
    if (value.size() > proto::kMaxValueBytes)
      fail(ErrorCode::InvalidArgument, "{}: a {} of {} bytes exceeds the TcpStore limit of {} bytes", call,
           what, value.size(), proto::kMaxValueBytes);
  }

  Deadline operation_deadline() const { return Deadline::after(rendezvous::clamp_store_wait(timeout())); }

  // Sends the request and reads the reply; `read_ok` reads the fields of an OK reply. A failure of the
  // connection itself leaves it unusable: a reply may be half read, and requests are not idempotent.
  template <typename ReadOk>
  std::invoke_result_t<ReadOk&> call(const proto::Request& request, Deadline deadline,
                                     const std::string& what, ReadOk read_ok) {
    std::lock_guard lock(mutex_);
    if (!broken_.empty())
      fail(ErrorCode::PeerFailed, "{} on the TcpStore at {}: the connection failed earlier ({})", what,
           socket_.endpoint(), broken_);
    request_deadline_ = deadline;
    requests_sent_.fetch_add(1, std::memory_order_relaxed);
    try {
      socket_.send_all(proto::encode_request(request), deadline);
      char status = 0;
      socket_.receive_exact(&status, 1, deadline);
      switch (static_cast<proto::Status>(status)) {
        case proto::Status::Ok:
          return read_ok();
        case proto::Status::Timeout:
          throw ServerAnswered(ErrorCode::Timeout, fmt::format("{} on the TcpStore at {} timed out: {}", what,
                                                               socket_.endpoint(), read_message()));
        case proto::Status::Error:
          throw ServerAnswered(
              ErrorCode::InvalidArgument,
              fmt::format("{} on the TcpStore at {} failed: {}", what, socket_.endpoint(), read_message()));
      }
      fail(ErrorCode::Protocol, "{}: the TcpStore at {} answered with unknown status {}", what,
           socket_.endpoint(), static_cast<int>(static_cast<unsigned char>(status)));
    } catch (const ServerAnswered& e) {
      throw Error(e.code(), e.what());
    } catch (const Error& e) {
      broken_ = e.what();
      socket_.close();
      throw Error(e.code(), fmt::format("{}: {}", what, e.what()));
    }
  }

  std::string read_bytes(std::size_t limit, Deadline deadline) {
    char header[4];
    socket_.receive_exact(header, sizeof(header), deadline);
    auto length = proto::get_u32(header);
    if (length > limit)
      fail(ErrorCode::Protocol, "the TcpStore at {} sent a field of {} bytes (limit {})", socket_.endpoint(),
           length, limit);
    std::string bytes(length, '\0');
    socket_.receive_exact(bytes.data(), length, deadline);
    return bytes;
  }

  // GET_MANY's OK reply: n, n lengths, the values back to back; appended to `into`.
  void read_values(std::size_t expected, std::vector<std::string>& into) {
    char header[4];
    socket_.receive_exact(header, sizeof(header), request_deadline_);
    auto count = proto::get_u32(header);
    if (count != expected)
      fail(ErrorCode::Protocol, "the TcpStore at {} answered a GET_MANY of {} keys with {} values",
           socket_.endpoint(), expected, count);
    std::string lengths(4 * static_cast<std::size_t>(count), '\0');
    socket_.receive_exact(lengths.data(), lengths.size(), request_deadline_);
    std::size_t total = 0;
    for (std::size_t i = 0; i < count; ++i) total += proto::get_u32(lengths.data() + 4 * i);
    if (total > proto::kMaxGetManyValueBytes)
      fail(ErrorCode::Protocol, "the TcpStore at {} sent GET_MANY values of {} bytes together (limit {})",
           socket_.endpoint(), total, proto::kMaxGetManyValueBytes);
    std::string bytes(total, '\0');
    socket_.receive_exact(bytes.data(), total, request_deadline_);
    std::size_t offset = 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t length = proto::get_u32(lengths.data() + 4 * i);
      into.emplace_back(bytes, offset, length);
      offset += length;
    }
  }

  std::string read_message() { return read_bytes(proto::kMaxMessageBytes, request_deadline_); }

  bool read_flag() {
    char flag = 0;
    socket_.receive_exact(&flag, 1, request_deadline_);
    return flag != 0;
  }

  std::mutex mutex_;
  ClientSocket socket_;
  const ServerAddress address_;
  Deadline request_deadline_ = Deadline::never();  // of the call in progress, under mutex_
  std::string broken_;                             // why the connection is unusable, once it is
  std::atomic<std::uint64_t> requests_sent_{0};    // read without mutex_: a count, not a state
};

std::shared_ptr<Store> connect_client(const ServerAddress& address, Duration connect_timeout) {
  auto deadline = Deadline::after(rendezvous::clamp_store_wait(connect_timeout));
  auto client =
      std::make_shared<TcpStoreClient>(ClientSocket::connect(address.host, address.port, deadline), address);
  // The hello gets a few seconds even when connecting used up the deadline: the server is there.
  client->hello(address.job_token,
                deadline.remaining() < kReplyGrace ? Deadline::after(kReplyGrace) : deadline);
  log::debug("connected to the TcpStore at {}", address.host);
  return client;
}

}  // namespace

std::shared_ptr<Store> connect_tcp_store(const std::string& host, std::uint16_t port,
                                         const std::string& job_token, Duration connect_timeout) {
  if (host.empty() || port == 0)
    fail(ErrorCode::InvalidArgument, "connect_tcp_store: '{}' port {} is not an address to connect to", host,
         port);
  if (job_token.size() > proto::kMaxTokenBytes)
    fail(ErrorCode::InvalidArgument,
         "connect_tcp_store: a job token of {} bytes exceeds the limit of {} bytes", job_token.size(),
         proto::kMaxTokenBytes);
  return connect_client({host, port, job_token}, connect_timeout);
}

}  // namespace canopy
