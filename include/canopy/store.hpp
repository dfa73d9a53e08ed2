// The key-value store ranks meet through: a TCP store hosted by the launcher or rank 0,
// or a directory on a shared filesystem. Values are arbitrary bytes held in std::string.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace canopy {

using Duration = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(std::string_view key, std::string_view value) = 0;
  // Waits until the key exists, up to `timeout`; throws Error(Timeout) naming the key.
  virtual std::string get(std::string_view key, Duration timeout) = 0;
  // Adds delta to the integer stored under key (0 when absent) and returns the new value.
  virtual std::int64_t add(std::string_view key, std::int64_t delta) = 0;
  // Stores `desired` if the current value equals `expected` (absent counts as equal to an
  // empty `expected`). Returns the value stored afterwards.
  virtual std::string compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) = 0;
  // True when every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists; throws Error(Timeout) naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys, Duration timeout) = 0;
  // Removes the key; true when it existed.
  virtual bool remove(std::string_view key) = 0;
  // Waits until every key exists, as wait() does, and returns their values in the order of `keys`; throws
  // Error(Timeout) naming the missing keys. The TcpStore asks for them all in one request (a bootstrap's
  // rank 0 reads P addresses in one round trip, not P); this default is a wait and one get per key.
  virtual std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) {
    wait(keys, timeout);
    std::vector<std::string> values;
    values.reserve(keys.size());
    for (const auto& key : keys) values.push_back(get(key, timeout));
    return values;
  }

  // Another handle on the same keys whose calls never wait behind this handle's (a TcpStore client's shares
  // its multiplexed connection; a torch TCPStore's opens a second one), each bounded by `timeout`: for a
  // thread that polls the store while others may hold this handle in a long get() (the communicator's
  // liveness monitor). nullptr when this kind of store cannot open one.
  virtual std::shared_ptr<Store> open_another(Duration timeout) {
    (void)timeout;
    return nullptr;
  }

  // The requests this handle has sent to a store server: one per round trip on a TcpStore connection (the
  // hello not counted), so a benchmark can report store requests per rank. A PrefixStore reports its base's;
  // open_another's handle keeps its own count, even on a shared connection. 0 for a store without a server
  // (the FileStore).
  virtual std::uint64_t requests_sent() const { return 0; }

  // The timeout used by the overloads without one.
  Duration timeout() const { return timeout_; }
  void set_timeout(Duration timeout) { timeout_ = timeout; }
  std::string get(std::string_view key) { return get(key, timeout_); }
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  std::vector<std::string> get_many(const std::vector<std::string>& keys) { return get_many(keys, timeout_); }

 private:
  Duration timeout_ = std::chrono::seconds(300);
};

// A view of another store with every key prefixed by `prefix` + "/": sub-groups and restart rounds.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);

  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key, Duration timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  std::string compare_set(std::string_view key, std::string_view expected, std::string_view desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool remove(std::string_view key) override;
  std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) override;
  std::shared_ptr<Store> open_another(Duration timeout) override;
  std::uint64_t requests_sent() const override;
  using Store::get;
  using Store::get_many;
  using Store::wait;

 private:
  std::string full(std::string_view key) const;
  std::vector<std::string> full(const std::vector<std::string>& keys) const;

  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// A client of a TcpStore server. Every connection presents `job_token`; the server drops it otherwise.
std::shared_ptr<Store> connect_tcp_store(const std::string& host, std::uint16_t port,
                                         const std::string& job_token, Duration connect_timeout);

// A store in a directory shared by all ranks (NFS, Lustre...): atomic renames only, no inotify.
std::shared_ptr<Store> open_file_store(const std::string& directory);

// A TcpStore server running on its own thread until destroyed.
class TcpStoreServer {
 public:
  // port 0 picks a free port; host "" listens on every address (IPv6 and IPv4).
  TcpStoreServer(const std::string& host, std::uint16_t port, std::string job_token);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace canopy
