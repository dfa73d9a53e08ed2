#include <memory>
#include <utility>

#include "canopy/store.hpp"

namespace canopy {

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix)) {
  set_timeout(base_->timeout());
}

std::string PrefixStore::full(std::string_view key) const {
  std::string result;
  result.reserve(prefix_.size() + 1 + key.size());
  result.append(prefix_).append("/").append(key);
  return result;
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> result;
  result.reserve(keys.size());
  for (const auto& key : keys) result.push_back(full(key));
  return result;
}

void PrefixStore::set(std::string_view key, std::string_view value) { base_->set(full(key), value); }
std::string PrefixStore::get(std::string_view key, Duration timeout) { return base_->get(full(key), timeout); }
std::int64_t PrefixStore::add(std::string_view key, std::int64_t delta) { return base_->add(full(key), delta); }
std::string PrefixStore::compare_set(std::string_view key, std::string_view expected, std::string_view desired) {
  return base_->compare_set(full(key), expected, desired);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return base_->check(full(keys)); }
void PrefixStore::wait(const std::vector<std::string>& keys, Duration timeout) { base_->wait(full(keys), timeout); }
bool PrefixStore::remove(std::string_view key) { return base_->remove(full(key)); }
std::vector<std::string> PrefixStore::get_many(const std::vector<std::string>& keys, Duration timeout) {
  return base_->get_many(full(keys), timeout);
}

std::uint64_t PrefixStore::requests_sent() const { return base_->requests_sent(); }

std::shared_ptr<Store> PrefixStore::open_another(Duration timeout) {
  auto base = base_->open_another(timeout);
  if (!base) return nullptr;
  auto another = std::make_shared<PrefixStore>(std::move(base), prefix_);
  another->set_timeout(timeout);
  return another;
}

}  // namespace canopy
