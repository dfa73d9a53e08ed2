// A store whose waits give up once a rank they may be waiting for is gone: what a shrunk group forms
// through, so that a member that dies after the survivors agreed on the members costs them a heartbeat
// timeout, not the whole connect deadline (shrink.cpp).
#pragma once

#include <functional>
#include <memory>

#include "canopy/store.hpp"

namespace canopy::collectives {

class WatchedStore final : public Store {
 public:
  // `check` throws when the wait is hopeless (a member is gone); it runs between slices of a wait that
  // lasts longer than `slice`, never on a wait that the keys end at once.
  WatchedStore(std::shared_ptr<Store> inner, std::function<void()> check, Duration slice);

  void set(std::string_view key, std::string_view value) override { inner_->set(key, value); }
  std::string get(std::string_view key, Duration timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override { return inner_->add(key, delta); }
  std::string compare_set(std::string_view key, std::string_view expected, std::string_view desired) override {
    return inner_->compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool remove(std::string_view key) override { return inner_->remove(key); }
  std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) override;
  std::uint64_t requests_sent() const override { return inner_->requests_sent(); }
  using Store::get;
  using Store::get_many;
  using Store::wait;

 private:
  // Runs `attempt` with slices of the timeout until it returns or the timeout passes (then its Timeout).
  template <typename F>
  auto in_slices(Duration timeout, F&& attempt);

  std::shared_ptr<Store> inner_;
  std::function<void()> check_;
  Duration slice_;
};

}  // namespace canopy::collectives
