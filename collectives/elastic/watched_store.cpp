#include "collectives/elastic/watched_store.hpp"

#include <algorithm>

#include "canopy/error.hpp"
#include "common/deadline.hpp"

namespace canopy::collectives {

WatchedStore::WatchedStore(std::shared_ptr<Store> inner, std::function<void()> check, Duration slice)
    : inner_(std::move(inner)), check_(std::move(check)), slice_(slice) {
  set_timeout(inner_->timeout());
}

template <typename F>
auto WatchedStore::in_slices(Duration timeout, F&& attempt) {
  const Deadline deadline = Deadline::after(timeout);
  for (;;) {
    const auto left = std::chrono::duration_cast<Duration>(deadline.remaining());
    try {
      return attempt(std::min(left, slice_));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout || left <= slice_) throw;
    }
    check_();
  }
}

std::string WatchedStore::get(std::string_view key, Duration timeout) {
  return in_slices(timeout, [&](Duration slice) { return inner_->get(key, slice); });
}

void WatchedStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  in_slices(timeout, [&](Duration slice) {
    inner_->wait(keys, slice);
    return 0;
  });
}

std::vector<std::string> WatchedStore::get_many(const std::vector<std::string>& keys, Duration timeout) {
  return in_slices(timeout, [&](Duration slice) { return inner_->get_many(keys, slice); });
}

}  // namespace canopy::collectives
