// The ranks' records (host_layout_exchange.hpp) as the meshes read them: a record never changes once
// published, so each is read from the store at most once, and the communicator can read, in one request,
// every record its meshes will ask for (rank 0 has them all already, from the layout's gathering).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "canopy/store.hpp"

namespace canopy::collectives {

// A view of `base` whose get_many answers from what it read (or was told) before, and asks the store only
// for the rest, in one request. Every other call goes to `base`. Only for keys whose values never change.
// Thread-safe (the point-to-point mesh is driven by the progress thread, the collectives' by the caller's).
class RecordCache final : public Store {
 public:
  explicit RecordCache(std::shared_ptr<Store> base) : base_(std::move(base)) {}

  // `key` holds `value`: no request will read it.
  void learn(const std::string& key, std::string value);

  void set(std::string_view key, std::string_view value) override { base_->set(key, value); }
  std::string get(std::string_view key, Duration timeout) override {
    return get_many({std::string(key)}, timeout)[0];
  }
  std::int64_t add(std::string_view key, std::int64_t delta) override { return base_->add(key, delta); }
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override {
    return base_->compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return base_->check(keys); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override { base_->wait(keys, timeout); }
  bool remove(std::string_view key) override { return base_->remove(key); }
  std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) override;
  std::uint64_t requests_sent() const override { return base_->requests_sent(); }
  using Store::get;
  using Store::get_many;
  using Store::wait;

 private:
  const std::shared_ptr<Store> base_;
  mutable std::mutex mutex_;
  std::map<std::string, std::string, std::less<>> known_;
};

}  // namespace canopy::collectives
