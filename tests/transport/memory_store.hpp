// A Store in this process's memory, shared by ranks that run as threads of one test.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "common/error.hpp"

namespace canopy::testing {

class MemoryStore final : public Store {
 public:
  void set(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mutex_);
    values_[std::string(key)] = std::string(value);
    changed_.notify_all();
  }
  std::string get(std::string_view key, Duration timeout) override {
    std::unique_lock lock(mutex_);
    std::string name(key);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(name) != 0; }))
      fail(ErrorCode::Timeout, "MemoryStore: key '{}' did not appear within {} ms", name, timeout.count());
    return values_[name];
  }
  std::int64_t add(std::string_view key, std::int64_t delta) override {
    std::lock_guard lock(mutex_);
    std::string& value = values_[std::string(key)];
    std::int64_t result = (value.empty() ? 0 : std::stoll(value)) + delta;
    value = std::to_string(result);
    changed_.notify_all();
    return result;
  }
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override {
    std::lock_guard lock(mutex_);
    auto it = values_.find(std::string(key));
    std::string current = it == values_.end() ? std::string() : it->second;
    if (current == expected) {
      values_[std::string(key)] = std::string(desired);
      changed_.notify_all();
      return std::string(desired);
    }
    return current;
  }
  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mutex_);
    for (const auto& key : keys)
      if (values_.count(key) == 0) return false;
    return true;
  }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    for (const auto& key : keys) get(key, timeout);
  }
  bool remove(std::string_view key) override {
    std::lock_guard lock(mutex_);
    return values_.erase(std::string(key)) != 0;
  }
  using Store::get;
  using Store::wait;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace canopy::testing
