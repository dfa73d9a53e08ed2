#include "python/c10d_store.hpp"

#include <algorithm>
#include <cctype>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/deadline.hpp"
#include "common/error.hpp"

namespace canopy::pytorch {
namespace {

// c10d reports a wait that ran out as "Socket Timeout" (TCPStore) or "Timeout ..." (FileStore), and a store
// that went away as "Broken pipe", "Connection reset by peer"...: the first is Error(Timeout), the rest
// Error(PeerFailed), each naming the request.
[[noreturn]] void rethrow_as_canopy_error(std::string_view request, const std::exception& e) {
  std::string message = e.what();
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    message = c10_error->what_without_backtrace();
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const ErrorCode code =
      lower.find("timeout") != std::string::npos ? ErrorCode::Timeout : ErrorCode::PeerFailed;
  fail(code, "torch's store: {}: {}", request, message);
}

template <typename F>
auto translate(std::string_view request, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    rethrow_as_canopy_error(request, e);
  }
}

std::string describe_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "'" : ", '") + key + "'";
  return out;
}

// PrefixStore keeps its prefix protected and offers no getter; a derived class may read it.
struct PrefixOf : c10d::PrefixStore {
  static const std::string& of(const c10d::PrefixStore& store) { return store.*(&PrefixOf::prefix_); }
};

}  // namespace

UnwrappedPrefixes unwrap_prefixes(c10::intrusive_ptr<c10d::Store> store) {
  UnwrappedPrefixes unwrapped;
  while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store.get())) {
    unwrapped.prefixes.push_back(PrefixOf::of(*prefixed));
    store = prefixed->getUnderlyingStore();
  }
  unwrapped.inner = std::move(store);
  return unwrapped;
}

C10dStore::C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

void C10dStore::set(std::string_view key, std::string_view value) {
  translate(fmt::format("set '{}'", key), [&] { store_->set(std::string(key), as_bytes(value)); });
}

std::string C10dStore::get(std::string_view key, Duration timeout) {
  const std::string name(key);
  const std::string request = fmt::format("get '{}' (waited up to {} ms)", key, timeout.count());
  wait_by_checking({name}, timeout, request);  // c10d's get waits as long as the store's own timeout
  return translate(request, [&] { return as_text(store_->get(name)); });
}

std::int64_t C10dStore::add(std::string_view key, std::int64_t delta) {
  return translate(fmt::format("add to '{}'", key), [&] { return store_->add(std::string(key), delta); });
}

// The same semantics except for an absent key with a non-empty `expected`, which c10d answers with
// `expected` (Canopy's own stores with ""): Canopy only ever claims a key, with an empty `expected`.
std::string C10dStore::compare_set(std::string_view key, std::string_view expected,
                                   std::string_view desired) {
  return translate(fmt::format("compare-and-set '{}'", key), [&] {
    return as_text(store_->compareSet(std::string(key), as_bytes(expected), as_bytes(desired)));
  });
}

bool C10dStore::check(const std::vector<std::string>& keys) {
  return translate(fmt::format("check {}", describe_keys(keys)), [&] { return store_->check(keys); });
}

void C10dStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  wait_by_checking(keys, timeout, fmt::format("wait for {} (up to {} ms)", describe_keys(keys), timeout.count()));
}

// Not c10d's own wait: torch 1.13's TCPStore leaves a wait that timed out registered with its server, which
// answers it once the key comes, on the same connection, where the next request reads that answer as the
// start of its own; its length is then garbage, and the client blocks for the store's whole timeout (30 min
// under init_process_group). Canopy waits briefly and often (a dial looks up its peer for 1 ms), so a
// bounded wait here is a series of checks, which leave nothing behind.
void C10dStore::wait_by_checking(const std::vector<std::string>& keys, Duration timeout,
                                 std::string_view request) {
  constexpr Clock::duration kFirstPause = std::chrono::microseconds(200);
  constexpr Clock::duration kLongestPause = std::chrono::milliseconds(10);
  const Clock::time_point deadline = Clock::now() + timeout;
  Clock::duration pause = kFirstPause;
  while (!translate(request, [&] { return store_->check(keys); })) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) fail(ErrorCode::Timeout, "torch's store: {}: not there in time", request);
    std::this_thread::sleep_for(std::min(pause, deadline - now));
    pause = std::min(pause * 2, kLongestPause);
  }
}

bool C10dStore::remove(std::string_view key) {
  return translate(fmt::format("delete '{}'", key), [&] { return store_->deleteKey(std::string(key)); });
}

std::shared_ptr<Store> C10dStore::open_another(Duration timeout) {
  const auto [prefixes, inner] = unwrap_prefixes(store_);
  auto* tcp = dynamic_cast<c10d::TCPStore*>(inner.get());
  if (tcp == nullptr) return nullptr;
  c10d::TCPStoreOptions options;
  options.port = tcp->getPort();
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> another =
      translate(fmt::format("connect a second client to {}:{}", tcp->getHost(), options.port), [&] {
        return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::TCPStore>(tcp->getHost(), options));
      });
  for (auto prefix = prefixes.rbegin(); prefix != prefixes.rend(); ++prefix)
    another = c10::make_intrusive<c10d::PrefixStore>(*prefix, another);
  return std::make_shared<C10dStore>(std::move(another));
}

}  // namespace canopy::pytorch
