#include "collectives/forming/record_cache.hpp"

namespace canopy::collectives {

void RecordCache::learn(const std::string& key, std::string value) {
  std::lock_guard lock(mutex_);
  known_.insert_or_assign(key, std::move(value));
}

std::vector<std::string> RecordCache::get_many(const std::vector<std::string>& keys, Duration timeout) {
  std::vector<std::string> unknown;
  {
    std::lock_guard lock(mutex_);
    for (const std::string& key : keys)
      if (!known_.contains(key)) unknown.push_back(key);
  }
  if (!unknown.empty()) {
    std::vector<std::string> values = base_->get_many(unknown, timeout);  // outside the lock
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < unknown.size(); ++i)
      known_.insert_or_assign(unknown[i], std::move(values[i]));
  }
  std::lock_guard lock(mutex_);
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(known_.find(key)->second);
  return values;
}

}  // namespace canopy::collectives
