// The keys and values a TcpStore server holds, with the store's semantics (counters, compare-and-set)
// and no networking: the server's event loop owns one and calls it from its single thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::rendezvous {

// Counters are stored as decimal text, so that get() of a counter reads as a number (as in PyTorch).
// Returns current + delta; throws Error(InvalidArgument) naming the key when `current` is not an
// integer or the sum overflows.
std::int64_t add_to_counter(std::string_view key, std::string_view current, std::int64_t delta);

// Each value is an immutable shared buffer: a reply being written holds a reference to the value it sends
// (an answer every rank reads is held once, not once a reader), and a set stores a new buffer instead of
// changing the old one under a write in flight.
class KeyValueTable {
 public:
  const std::string* find(std::string_view key) const;
  // The value's buffer, for a reply to hold while it is written; nullptr when the key is absent.
  std::shared_ptr<const std::string> share(std::string_view key) const;
  void set(std::string_view key, std::string_view value);
  std::int64_t add(std::string_view key, std::int64_t delta);
  // The value stored afterwards ("" when the key stays absent); `changed` tells whether it was written.
  std::string compare_set(std::string_view key, std::string_view expected, std::string_view desired,
                          bool& changed);
  bool remove(std::string_view key);
  // The first of `keys` that is absent, or nullptr when all exist.
  const std::string* first_missing(const std::vector<std::string>& keys) const;
  std::size_t size() const { return values_.size(); }

 private:
  std::map<std::string, std::shared_ptr<const std::string>, std::less<>> values_;
};

}  // namespace canopy::rendezvous
