// canopy::Store over the c10d::Store torch hands a backend's creator (a PrefixStore over the TCPStore,
// FileStore or user store of init_process_group), so that the communicator meets its peers where torch's
// ranks met, with no second store on MASTER_PORT.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/store.hpp"

namespace canopy::pytorch {

// c10d's values are byte vectors, Canopy's strings.
inline std::vector<std::uint8_t> as_bytes(std::string_view text) {
  return {text.begin(), text.end()};
}
inline std::string as_text(const std::vector<std::uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

// The c10d PrefixStores around a store, outermost first, and the store inside them.
struct UnwrappedPrefixes {
  std::vector<std::string> prefixes;
  c10::intrusive_ptr<c10d::Store> inner;
};
UnwrappedPrefixes unwrap_prefixes(c10::intrusive_ptr<c10d::Store> store);

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store);

  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key, Duration timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  std::string compare_set(std::string_view key, std::string_view expected, std::string_view desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool remove(std::string_view key) override;
  // A TCPStore under the prefixes gets a second client connection (with the same prefixes), so that the
  // liveness monitor's heartbeats never queue behind a long wait() on the first; any other store: nullptr.
  std::shared_ptr<Store> open_another(Duration timeout) override;
  using Store::get;
  using Store::wait;

 private:
  // Until every key is there, or Error(Timeout) once `timeout` has passed; see c10d_store.cpp.
  void wait_by_checking(const std::vector<std::string>& keys, Duration timeout, std::string_view request);

  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace canopy::pytorch
