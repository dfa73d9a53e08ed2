#include "rendezvous/key_value_table.hpp"

#include <charconv>

#include "common/error.hpp"
#include "rendezvous/printable.hpp"

namespace canopy::rendezvous {

std::int64_t add_to_counter(std::string_view key, std::string_view current, std::int64_t delta) {
  std::int64_t value = 0;
  if (!current.empty()) {
    auto [end, ec] = std::from_chars(current.data(), current.data() + current.size(), value);
    if (ec != std::errc() || end != current.data() + current.size())
      fail(ErrorCode::InvalidArgument, "add({}, {}): the stored value {} is not an integer", printable(key),
           delta, printable(current, 40));
  }
  std::int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum))
    fail(ErrorCode::InvalidArgument, "add({}, {}): {} + {} overflows a 64-bit integer", printable(key), delta,
         value, delta);
  return sum;
}

const std::string* KeyValueTable::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : it->second.get();
}

std::shared_ptr<const std::string> KeyValueTable::share(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : it->second;
}

void KeyValueTable::set(std::string_view key, std::string_view value) {
  auto stored = std::make_shared<const std::string>(value);
  auto it = values_.find(key);
  if (it == values_.end()) {
    values_.emplace(std::string(key), std::move(stored));
  } else {
    it->second = std::move(stored);
  }
}

std::int64_t KeyValueTable::add(std::string_view key, std::int64_t delta) {
  const std::string* current = find(key);
  std::int64_t sum = add_to_counter(key, current ? std::string_view(*current) : std::string_view(), delta);
  set(key, std::to_string(sum));
  return sum;
}

std::string KeyValueTable::compare_set(std::string_view key, std::string_view expected,
                                       std::string_view desired, bool& changed) {
  const std::string* current = find(key);
  bool matches = current ? *current == expected : expected.empty();
  changed = matches;
  if (matches) {
    set(key, desired);
    return std::string(desired);
  }
  return current ? *current : std::string();
}

bool KeyValueTable::remove(std::string_view key) {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  values_.erase(it);
  return true;
}

const std::string* KeyValueTable::first_missing(const std::vector<std::string>& keys) const {
  for (const auto& key : keys)
    if (!find(key)) return &key;
  return nullptr;
}

}  // namespace canopy::rendezvous
