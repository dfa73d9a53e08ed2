// The TcpStore client: a Store handle on one multiplexed connection (rendezvous/store_connection.hpp),
// which every thread may call at once. GET and WAIT wait on the server; each request's own deadline runs a
// little longer, to catch a dead server.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "canopy/store.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/printable.hpp"
#include "rendezvous/store_connection.hpp"
#include "rendezvous/store_protocol.hpp"
#include "rendezvous/store_wait.hpp"

namespace canopy {
namespace {

namespace proto = rendezvous::protocol;
using rendezvous::printable;
using rendezvous::StoreConnection;

// How much longer than the server-side wait the client waits for the reply before it calls the
// server dead.
constexpr Duration kReplyGrace = std::chrono::seconds(5);

class TcpStoreClient final : public Store {
 public:
  explicit TcpStoreClient(std::shared_ptr<StoreConnection> connection) : connection_(std::move(connection)) {}
  ~TcpStoreClient() override {
    log::debug("TcpStore client of {}: {} requests sent", connection_->endpoint(), requests_sent_.load());
  }

  std::uint64_t requests_sent() const override { return requests_sent_.load(std::memory_order_relaxed); }

  // The same connection, with a count and a timeout of its own: its requests never queue behind this
  // one's (a GET may wait minutes) because the connection answers each request as it completes.
  std::shared_ptr<Store> open_another(Duration timeout) override {
    auto another = std::make_shared<TcpStoreClient>(connection_);
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
    call(std::move(request), operation_deadline(), fmt::format("set({})", printable(key)));
  }

  std::string get(std::string_view key, Duration timeout) override {
    check_key(key, "get");
    timeout = rendezvous::clamp_store_wait(timeout);
    proto::Request request;
    request.command = proto::Command::Get;
    request.keys.emplace_back(key);
    request.timeout_ms = static_cast<std::uint64_t>(timeout.count());
    return call(std::move(request), Deadline::after(timeout + kReplyGrace),
                fmt::format("get({})", printable(key)))
        .bytes;
  }

  std::int64_t add(std::string_view key, std::int64_t delta) override {
    check_key(key, "add");
    proto::Request request;
    request.command = proto::Command::Add;
    request.keys.emplace_back(key);
    request.delta = delta;
    return call(std::move(request), operation_deadline(), fmt::format("add({}, {})", printable(key), delta))
        .number;
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
    return call(std::move(request), operation_deadline(), fmt::format("compare_set({})", printable(key)))
        .bytes;
  }

  bool check(const std::vector<std::string>& keys) override {
    for (const auto& key : keys) check_key(key, "check");
    auto deadline = operation_deadline();
    for (std::size_t first = 0; first < keys.size(); first += proto::kMaxKeysPerRequest) {
      proto::Request request;
      request.command = proto::Command::Check;
      request.keys = slice(keys, first);
      auto what = fmt::format("check({})", rendezvous::printable_list(request.keys));
      bool all = call(std::move(request), deadline, what).flag;
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
      auto what = fmt::format("wait({})", rendezvous::printable_list(request.keys));
      call(std::move(request), Deadline::after(left + kReplyGrace), what);
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
      auto what = fmt::format("get_many({})", rendezvous::printable_list(request.keys));
      auto batch = call(std::move(request), Deadline::after(left + kReplyGrace), what).values;
      std::move(batch.begin(), batch.end(), std::back_inserter(values));
      first = last;
    }
    return values;
  }

  bool remove(std::string_view key) override {
    check_key(key, "remove");
    proto::Request request;
    request.command = proto::Command::Delete;
    request.keys.emplace_back(key);
    return call(std::move(request), operation_deadline(), fmt::format("remove({})", printable(key))).flag;
  }

 private:
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

  // One request on the shared connection, counted for this handle.
  rendezvous::StoreReply call(proto::Request request, Deadline deadline, const std::string& what) {
    requests_sent_.fetch_add(1, std::memory_order_relaxed);
    return connection_->call(std::move(request), deadline, what);
  }

  std::shared_ptr<StoreConnection> connection_;
  std::atomic<std::uint64_t> requests_sent_{0};  // this handle's, not its connection's
};

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
  rendezvous::ServerAddress address{host, port, job_token};
  return std::make_shared<TcpStoreClient>(std::make_shared<StoreConnection>(address, connect_timeout));
}

}  // namespace canopy
