#include "python/canopy_c10d_store.hpp"

#include "common/error.hpp"
#include "python/c10d_store.hpp"
#include "rendezvous/etcd_store.hpp"

namespace canopy::pytorch {

CanopyC10dStore::CanopyC10dStore(std::shared_ptr<canopy::Store> store, std::string address)
    : store_(std::move(store)), address_(std::move(address)) {}

void CanopyC10dStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  store_->set(key, as_text(value));
}

// c10d answers an absent key with a non-empty `current` with `current`; Canopy's stores answer "" (nothing
// stored): c10d's callers only compare the answer with what they wanted to store.
std::vector<uint8_t> CanopyC10dStore::compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                                 const std::vector<uint8_t>& desired) {
  return as_bytes(store_->compare_set(key, as_text(current), as_text(desired)));
}

// c10d's get waits for the key up to the store's timeout, which torch sets to the group's.
std::vector<uint8_t> CanopyC10dStore::get(const std::string& key) {
  return as_bytes(store_->get(key, timeout_));
}

int64_t CanopyC10dStore::add(const std::string& key, int64_t value) {
  return store_->add(key, value);
}

bool CanopyC10dStore::deleteKey(const std::string& key) {
  return store_->remove(key);
}

bool CanopyC10dStore::check(const std::vector<std::string>& keys) {
  return store_->check(keys);
}

int64_t CanopyC10dStore::getNumKeys() {
  fail(ErrorCode::InvalidArgument, "{}: num_keys() is not offered by Canopy's etcd store", address_);
}

void CanopyC10dStore::wait(const std::vector<std::string>& keys) {
  store_->wait(keys, timeout_);
}

void CanopyC10dStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  store_->wait(keys, timeout);
}

c10::intrusive_ptr<c10d::Store> connect_etcd_for_torch(const std::string& address,
                                                       const std::string& job_token,
                                                       std::chrono::milliseconds timeout) {
  auto store = c10::make_intrusive<CanopyC10dStore>(
      rendezvous::connect_etcd_store(address, job_token, timeout), address);
  store->setTimeout(timeout);
  return store;
}

std::shared_ptr<canopy::Store> canopy_store_behind(const c10::intrusive_ptr<c10d::Store>& store) {
  const UnwrappedPrefixes unwrapped = unwrap_prefixes(store);
  const auto* ours = dynamic_cast<const CanopyC10dStore*>(unwrapped.inner.get());
  if (ours == nullptr) return nullptr;
  std::shared_ptr<canopy::Store> view = ours->canopy_store();
  for (auto prefix = unwrapped.prefixes.rbegin(); prefix != unwrapped.prefixes.rend(); ++prefix)
    view = std::make_shared<PrefixStore>(view, *prefix);
  return view;
}

}  // namespace canopy::pytorch
