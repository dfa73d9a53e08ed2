// The Store on etcd v3: every operation is one of etcd's own primitives. set is a put; get and wait read,
// and when a key is absent watch it from the revision after that read (no polling, and nothing written in
// between is missed); add and compare_set are transactions that compare a key's revision or value;
// check, wait and get_many read many keys in one range where they lie together. Keys live under
// "<prefix>/kv/".
#include "rendezvous/etcd_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <random>
#include <unordered_map>

#include "common/error.hpp"
#include "common/fnv1a.hpp"
#include "common/log.hpp"
#include "rendezvous/base64.hpp"
#include "rendezvous/etcd_address.hpp"
#include "rendezvous/etcd_client.hpp"
#include "rendezvous/etcd_lease.hpp"
#include "rendezvous/key_value_table.hpp"
#include "rendezvous/printable.hpp"
#include "rendezvous/store_wait.hpp"

namespace canopy::rendezvous {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// etcd's --max-txn-ops default: the most reads one transaction may carry.
constexpr std::size_t kReadsPerTransaction = 128;
// A read inside a wait gets at least this long, so that a wait with little time left can still read once
// (and a cluster without quorum is named as such rather than as a missing key).
constexpr auto kLeastRequestTime = 1000ms;

json compare_version_equal(const std::string& key, std::int64_t version) {
  return {{"target", "VERSION"},
          {"key", base64_encode(key)},
          {"result", "EQUAL"},
          {"version", std::to_string(version)}};
}
json compare_modified_at(const std::string& key, std::int64_t revision) {
  return {{"target", "MOD"},
          {"key", base64_encode(key)},
          {"result", "EQUAL"},
          {"mod_revision", std::to_string(revision)}};
}
json compare_value_equal(const std::string& key, std::string_view value) {
  return {
      {"target", "VALUE"}, {"key", base64_encode(key)}, {"result", "EQUAL"}, {"value", base64_encode(value)}};
}
json read(const std::string& key) {
  return {{"request_range", {{"key", base64_encode(key)}}}};
}
json read_key(const std::string& key) {
  return {{"request_range", {{"key", base64_encode(key)}, {"keys_only", true}}}};
}

// The first key-value of a range response, or nullptr when the key is absent.
const json* first_kv(const json& range) {
  auto kvs = range.find("kvs");
  return kvs == range.end() || kvs->empty() ? nullptr : &kvs->front();
}

std::string decoded(const json& kv, const char* field) {
  auto text = kv.value(field, std::string());
  auto bytes = base64_decode(text);
  if (!bytes)
    fail(ErrorCode::Protocol, "etcd store: a {} in etcd's answer is not base64: {}", field,
         text.substr(0, 80));
  return *bytes;
}

// The range response of operation `index` of a transaction's answer.
const json& range_response(const json& answer, std::size_t index) {
  static const json empty = json::object();
  auto responses = answer.find("responses");
  if (responses == answer.end() || index >= responses->size()) return empty;
  auto range = (*responses)[index].find("response_range");
  return range == (*responses)[index].end() ? empty : *range;
}

std::int64_t revision_of(const json& answer) {
  auto header = answer.find("header");
  return header == answer.end() ? 0 : json_int(*header, "revision");
}

std::string random_hex() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}", device(), device());
}

class EtcdStore final : public Store {
 public:
  EtcdStore(std::shared_ptr<EtcdClient> client, std::shared_ptr<EtcdLease> lease)
      : client_(std::move(client)),
        lease_(std::move(lease)),
        receipts_(client_->address().prefix + "/receipt/" + random_hex() + "/") {}

  ~EtcdStore() override {
    if (!wrote_receipt_) return;
    try {  // best effort: a receipt only matters while its writer may retry
      std::string end = receipts_;
      end.back() = static_cast<char>('/' + 1);  // every key that starts with receipts_
      client_->call("/v3/kv/deleterange",
                    {{"key", base64_encode(receipts_)}, {"range_end", base64_encode(end)}},
                    Deadline::after(500ms), "removing its receipts");
    } catch (const Error&) {
    }
  }

  void set(std::string_view key, std::string_view value) override {
    call("/v3/kv/put", put(stored(key), value), Deadline::after(timeout()), "set", key);
  }

  std::string get(std::string_view key, Duration timeout) override {
    const Duration wait = clamp_store_wait(timeout);
    const Deadline deadline = Deadline::after(wait);
    const std::string name = stored(key);
    for (;;) {
      auto answer =
          call("/v3/kv/range", {{"key", base64_encode(name)}}, request_deadline(deadline), "get", key);
      if (const json* kv = first_kv(answer)) return decoded(*kv, "value");
      if (watch(name, revision_of(answer) + 1, deadline) == EtcdClient::WatchEnd::Deadline)
        fail(ErrorCode::Timeout, "get({}) on {} timed out after {} ms: the key was never set", printable(key),
             client_->describe(), wait.count());
    }
  }

  // A transaction that writes the sum only if the counter is still at the revision it was read at (absent:
  // version 0), retried with the value it read otherwise. The receipt written with the sum tells a retry
  // whether an attempt that failed over after etcd applied it already counted.
  std::int64_t add(std::string_view key, std::int64_t delta) override {
    const Deadline deadline = Deadline::after(timeout());
    const std::string name = stored(key);
    if (delta == 0) {
      // A read of the counter, not a write: what polls it every step (the join tickets) costs no Raft round
      // and no fsync. An absent counter reads as 0 and stays absent; the next add creates it.
      auto answer = call("/v3/kv/range", {{"key", base64_encode(name)}}, deadline, "add", key);
      const json* kv = first_kv(answer);
      return add_to_counter(key, kv ? decoded(*kv, "value") : std::string(), 0);
    }
    const std::string receipt_prefix = next_receipt_prefix();
    const std::string receipt_key = this_threads_receipt();
    std::string current;
    std::int64_t revision = 0;  // 0: absent, as far as this call knows
    for (;;) {
      const std::int64_t sum = add_to_counter(key, current, delta);
      const std::string receipt = receipt_prefix + std::to_string(sum);
      json request = {
          {"compare", {revision == 0 ? compare_version_equal(name, 0) : compare_modified_at(name, revision)}},
          {"success",
           {{{"request_put", put(name, std::to_string(sum))}}, {{"request_put", put(receipt_key, receipt)}}}},
          {"failure", {read(name), read(receipt_key)}}};
      if (deadline.expired())
        fail(ErrorCode::Timeout, "add({}) on {} lost every attempt to other writers of the key for {} ms",
             printable(key), client_->describe(), timeout().count());
      auto answer = call("/v3/kv/txn", request, deadline, "add", key);
      wrote_receipt_ = true;
      if (answer.value("succeeded", false)) return sum;
      if (const json* kv = first_kv(range_response(answer, 1));
          kv && decoded(*kv, "value").rfind(receipt_prefix, 0) == 0)
        return std::stoll(decoded(*kv, "value").substr(receipt_prefix.size()));
      const json* kv = first_kv(range_response(answer, 0));
      current = kv ? decoded(*kv, "value") : std::string();
      revision = kv ? json_int(*kv, "mod_revision") : 0;
    }
  }

  // Absent counts as equal to "": a first transaction swaps only an absent key, and a key that holds "" is
  // swapped by a second that compares the value, as any non-empty `expected` is.
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override {
    const Deadline deadline = Deadline::after(timeout());
    const std::string name = stored(key);
    if (expected.empty()) {
      json request = {{"compare", {compare_version_equal(name, 0)}},
                      {"success", {{{"request_put", put(name, desired)}}}},
                      {"failure", {read(name)}}};
      auto answer = call("/v3/kv/txn", request, deadline, "compare_set", key);
      if (answer.value("succeeded", false)) return std::string(desired);
      const json* kv = first_kv(range_response(answer, 0));
      std::string current = kv ? decoded(*kv, "value") : std::string();
      if (!current.empty() || !kv) return current;
    }
    json request = {{"compare", {compare_value_equal(name, expected)}},
                    {"success", {{{"request_put", put(name, desired)}}}},
                    {"failure", {read(name)}}};
    auto answer = call("/v3/kv/txn", request, deadline, "compare_set", key);
    if (answer.value("succeeded", false)) return std::string(desired);
    const json* kv = first_kv(range_response(answer, 0));
    return kv ? decoded(*kv, "value") : std::string();
  }

  bool check(const std::vector<std::string>& keys) override {
    return read_many(keys, 0, Reading::KeysOnly, Deadline::after(timeout()), "check").first_absent() ==
           keys.size();
  }

  // Reads the keys from the first not yet seen; at the first absent one, watches it from the revision after
  // the read that missed it, then reads on from there.
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    const Duration wait = clamp_store_wait(timeout);
    const Deadline deadline = Deadline::after(wait);
    std::size_t ready = 0;
    for (;;) {
      auto found = read_many(keys, ready, Reading::KeysOnly, request_deadline(deadline), "wait");
      const std::size_t absent = found.first_absent();
      if (absent == found.values.size()) return;
      ready += absent;
      if (watch(stored(keys[ready]), found.revision + 1, deadline) == EtcdClient::WatchEnd::Deadline)
        fail(ErrorCode::Timeout, "wait() on {} timed out after {} ms; still missing: {}", client_->describe(),
             wait.count(), printable_list(missing_keys(keys, ready)));
    }
  }

  // One read of every value; while some are absent, a wait for those and a read again, within the deadline.
  std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) override {
    const Deadline deadline = Deadline::after(clamp_store_wait(timeout));
    for (;;) {
      auto found = read_many(keys, 0, Reading::Values, request_deadline(deadline), "get_many");
      std::vector<std::string> absent;
      for (std::size_t i = 0; i < keys.size(); ++i)
        if (!found.values[i]) absent.push_back(keys[i]);
      if (absent.empty()) {
        std::vector<std::string> values;
        values.reserve(keys.size());
        for (auto& value : found.values) values.push_back(std::move(*value));
        return values;
      }
      wait(absent, std::chrono::duration_cast<Duration>(deadline.remaining()));
    }
  }

  // A transaction that deletes only a key that exists, with a receipt, so that a retry after a failover
  // still answers true when the first attempt removed it.
  bool remove(std::string_view key) override {
    const std::string name = stored(key);
    const std::string receipt = next_receipt_prefix() + "removed";
    const std::string receipt_key = this_threads_receipt();
    json request = {
        {"compare",
         {{{"target", "VERSION"}, {"key", base64_encode(name)}, {"result", "GREATER"}, {"version", "0"}}}},
        {"success",
         {{{"request_delete_range", {{"key", base64_encode(name)}}}},
          {{"request_put", put(receipt_key, receipt)}}}},
        {"failure", {read(receipt_key)}}};
    auto answer = call("/v3/kv/txn", request, Deadline::after(timeout()), "remove", key);
    wrote_receipt_ = true;
    if (answer.value("succeeded", false)) return true;
    const json* kv = first_kv(range_response(answer, 0));
    return kv && decoded(*kv, "value") == receipt;
  }

  std::shared_ptr<Store> open_another(Duration timeout) override {
    auto another = std::make_shared<EtcdStore>(client_, lease_);
    another->set_timeout(timeout);
    return another;
  }

  std::uint64_t requests_sent() const override { return requests_.load(); }

 private:
  enum class Reading { KeysOnly, Values };
  // What a read of many keys found: each key's value (nullopt: absent; "" for every key read KeysOnly) and
  // the store's revision at the read (the earliest, when it took several transactions).
  struct Found {
    std::vector<std::optional<std::string>> values;
    std::int64_t revision = 0;
    std::size_t first_absent() const {
      return static_cast<std::size_t>(std::find(values.begin(), values.end(), std::nullopt) - values.begin());
    }
  };

  std::string stored(std::string_view key) const {
    return client_->address().prefix + "/kv/" + std::string(key);
  }

  json put(const std::string& stored_key, std::string_view value) const {
    json request = {{"key", base64_encode(stored_key)}, {"value", base64_encode(value)}};
    if (lease_) request["lease"] = std::to_string(lease_->id());
    return request;
  }

  std::string next_receipt_prefix() { return fmt::format("{} ", ++operations_); }

  // One receipt key a thread, so that two threads' operations on this handle never overwrite each other's
  // receipt between an attempt and its retry.
  std::string this_threads_receipt() const {
    thread_local const std::string thread_tag = random_hex();
    return receipts_ + thread_tag;
  }

  static Deadline request_deadline(Deadline wait_deadline) {
    return wait_deadline.at() > Clock::now() + kLeastRequestTime ? wait_deadline
                                                                 : Deadline::after(kLeastRequestTime);
  }

  json call(std::string_view path, const json& request, Deadline deadline, std::string_view operation,
            std::string_view key) {
    ++requests_;
    return client_->call(path, request, deadline, fmt::format("{}({})", operation, printable(key)));
  }

  EtcdClient::WatchEnd watch(const std::string& stored_key, std::int64_t start_revision, Deadline deadline) {
    ++requests_;
    return client_->watch_for_put(stored_key, start_revision, deadline);
  }

  // keys[from..]: one range from the least of them to the greatest where what lies between is not much more
  // than they are (a gather's "addr/0".."addr/N" is exactly them), else transactions of up to 128 reads.
  Found read_many(const std::vector<std::string>& keys, std::size_t from, Reading reading, Deadline deadline,
                  std::string_view operation) {
    Found found;
    found.values.resize(keys.size() - from);
    if (from == keys.size()) return found;
    std::vector<std::string> names;
    names.reserve(keys.size() - from);
    for (std::size_t i = from; i < keys.size(); ++i) names.push_back(stored(keys[i]));
    const auto [least, greatest] = std::minmax_element(names.begin(), names.end());
    const bool keys_only = reading == Reading::KeysOnly;
    json request = {{"key", base64_encode(*least)},
                    {"range_end", base64_encode(*greatest + '\0')},
                    {"limit", std::to_string(2 * names.size() + 64)},
                    {"keys_only", keys_only}};
    auto answer = call("/v3/kv/range", request, deadline, operation, keys[from]);
    found.revision = revision_of(answer);
    if (!answer.value("more", false)) {
      std::unordered_map<std::string, std::string> by_name;
      if (auto kvs = answer.find("kvs"); kvs != answer.end())
        for (const auto& kv : *kvs)
          by_name.emplace(decoded(kv, "key"), keys_only ? std::string() : decoded(kv, "value"));
      for (std::size_t i = 0; i < names.size(); ++i)
        if (auto it = by_name.find(names[i]); it != by_name.end()) found.values[i] = it->second;
      return found;
    }
    for (std::size_t begin = 0; begin < names.size(); begin += kReadsPerTransaction) {
      const std::size_t end = std::min(names.size(), begin + kReadsPerTransaction);
      json reads = json::array();
      for (std::size_t i = begin; i < end; ++i)
        reads.push_back(keys_only ? read_key(names[i]) : read(names[i]));
      auto batch = call("/v3/kv/txn", {{"success", reads}}, deadline, operation, keys[from + begin]);
      for (std::size_t i = begin; i < end; ++i)
        if (const json* kv = first_kv(range_response(batch, i - begin)))
          found.values[i] = keys_only ? std::string() : decoded(*kv, "value");
    }
    return found;
  }

  // The keys from `from` on that are absent now, for a timeout's message (the first when the store cannot
  // tell any more).
  std::vector<std::string> missing_keys(const std::vector<std::string>& keys, std::size_t from) {
    try {
      auto found = read_many(keys, from, Reading::KeysOnly, Deadline::after(kLeastRequestTime), "wait");
      std::vector<std::string> missing;
      for (std::size_t i = 0; i < found.values.size(); ++i)
        if (!found.values[i]) missing.push_back(keys[from + i]);
      return missing;
    } catch (const Error&) {
      return {keys[from]};
    }
  }

  std::shared_ptr<EtcdClient> client_;
  std::shared_ptr<EtcdLease> lease_;  // null: keys outlive this process
  std::string receipts_;              // "<prefix>/receipt/<random>/": this handle's, one key a thread below
  std::atomic<std::uint64_t> operations_{0};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<bool> wrote_receipt_{false};
};

// The first client of a prefix records the job token's digest under "<prefix>/token"; a client whose
// token's digest differs belongs to another job.
void check_job_token(EtcdClient& client, const std::string& job_token, Deadline deadline) {
  const std::string key = client.address().prefix + "/token";
  const std::string digest = fmt::format("{:016x}", fnv1a64(job_token, fnv1a64("canopy etcd store")));
  json request = {
      {"compare", {compare_version_equal(key, 0)}},
      {"success", {{{"request_put", {{"key", base64_encode(key)}, {"value", base64_encode(digest)}}}}}},
      {"failure", {read(key)}}};
  auto answer = client.call("/v3/kv/txn", request, deadline, "checking the job token");
  if (answer.value("succeeded", false)) return;
  const json* kv = first_kv(range_response(answer, 0));
  if (kv && decoded(*kv, "value") != digest)
    fail(
        ErrorCode::Config,
        "{}: the prefix '{}' belongs to another job (its job token differs from this one's); give each job a "
        "prefix of its own, and every rank of a job the same CANOPY_JOB_TOKEN",
        client.describe(), client.address().prefix);
}

}  // namespace

bool etcd_built() {
  return true;
}

std::shared_ptr<Store> connect_etcd_store(const std::string& address, const std::string& job_token,
                                          Duration timeout, Duration lease_ttl) {
  auto client = std::make_shared<EtcdClient>(parse_etcd_address(address));
  const Deadline deadline = Deadline::after(clamp_store_wait(timeout));
  check_job_token(*client, job_token, deadline);
  std::shared_ptr<EtcdLease> lease;
  if (lease_ttl > Duration::zero()) lease = std::make_shared<EtcdLease>(client, lease_ttl, deadline);
  auto store = std::make_shared<EtcdStore>(std::move(client), std::move(lease));
  store->set_timeout(timeout);
  return store;
}

}  // namespace canopy::rendezvous
