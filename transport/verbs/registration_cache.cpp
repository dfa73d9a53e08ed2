#include "transport/verbs/registration_cache.hpp"

#include "common/error.hpp"

namespace canopy::transport::verbs {
namespace {

constexpr std::uintptr_t kPage = 4096;

}  // namespace

RegistrationCache::RegistrationCache(RegisterFn register_fn, DeregisterFn deregister_fn, bool keep_idle,
                                     std::size_t capacity)
    : register_fn_(std::move(register_fn)),
      deregister_fn_(std::move(deregister_fn)),
      keep_idle_(keep_idle),
      capacity_(capacity) {}

RegistrationCache::~RegistrationCache() {
  clear();
}

RegistrationCache::Lease RegistrationCache::acquire(const void* address, std::size_t length, bool writable) {
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  const std::uintptr_t end = begin + length;
  ++clock_;
  for (auto& [id, entry] : entries_) {
    // A writable registration serves a send too; a read-only one never serves a receive.
    if (entry.begin <= begin && end <= entry.end && (entry.writable || !writable)) {
      ++entry.leases;
      entry.last_use = clock_;
      return Lease{id, entry.registration.lkey, entry.registration.rkey};
    }
  }
  Entry entry;
  entry.begin = begin & ~(kPage - 1);
  entry.end = (end + kPage - 1) & ~(kPage - 1);
  entry.writable = writable;
  entry.registration = register_fn_(entry.begin, entry.end - entry.begin, writable);
  entry.leases = 1;
  entry.last_use = clock_;
  const std::uint64_t id = next_entry_++;
  entries_.emplace(id, entry);
  trim();
  return Lease{id, entry.registration.lkey, entry.registration.rkey};
}

void RegistrationCache::release(const Lease& lease) {
  auto it = entries_.find(lease.entry);
  if (it == entries_.end() || it->second.leases <= 0)
    fail(ErrorCode::Protocol, "registration cache: release of a lease (entry {}) that is not held",
         lease.entry);
  --it->second.leases;
  trim();
}

void RegistrationCache::trim() {
  std::size_t idle = 0;
  for (const auto& [id, entry] : entries_) idle += entry.leases == 0 ? 1 : 0;
  const std::size_t keep = keep_idle_ ? capacity_ : 0;
  while (idle > keep) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.leases == 0 &&
          (oldest == entries_.end() || it->second.last_use < oldest->second.last_use))
        oldest = it;
    deregister_fn_(oldest->second.registration);
    entries_.erase(oldest);
    --idle;
  }
}

void RegistrationCache::clear() {
  for (auto& [id, entry] : entries_) deregister_fn_(entry.registration);
  entries_.clear();
}

}  // namespace canopy::transport::verbs
