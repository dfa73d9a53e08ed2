// A minimal Store in a directory, for ranks forked by a test: one file per key, written to a temporary
// name and renamed into place; counters and compare-and-set under flock(). Stands in until the
// rendezvous layer's FileStore can be used here.
#pragma once

#include <string>
#include <vector>

#include "canopy/store.hpp"

namespace canopy::testing {

class DirectoryStore final : public Store {
 public:
  explicit DirectoryStore(std::string directory) : directory_(std::move(directory)) {}

  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key, Duration timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  std::string compare_set(std::string_view key, std::string_view expected, std::string_view desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool remove(std::string_view key) override;
  using Store::get;
  using Store::wait;

 private:
  std::string path_of(std::string_view key) const;

  std::string directory_;
};

}  // namespace canopy::testing
