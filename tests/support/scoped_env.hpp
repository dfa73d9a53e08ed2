// Environment variables set for one scope: the destructor puts back what was there before, so that one
// test's settings never leak into the next test of the same binary.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace canopy::testing {

class ScopedEnv {
 public:
  ScopedEnv() = default;
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  ScopedEnv& set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
    return *this;
  }
  // Sets `name` only where the environment does not already give it (to run a test at other values).
  ScopedEnv& set_default(const std::string& name, const std::string& value) {
    if (std::getenv(name.c_str()) == nullptr) set(name, value);
    return *this;
  }
  ScopedEnv& unset(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
    return *this;
  }

 private:
  void save(const std::string& name) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// What canopy-run gives rank `rank` of `size` ranks, all on this host, with the store it hosts (outside the
// ranks) at 127.0.0.1:`port`, over loopback.
inline void canopy_run_environment(ScopedEnv& env, int rank, int size, std::uint16_t port,
                                   const std::string& token) {
  env.set("CANOPY_RANK", std::to_string(rank))
      .set("CANOPY_WORLD_SIZE", std::to_string(size))
      .set("CANOPY_LOCAL_RANK", std::to_string(rank))
      .set("CANOPY_LOCAL_WORLD_SIZE", std::to_string(size))
      .set("CANOPY_MASTER_ADDR", "127.0.0.1")
      .set("CANOPY_MASTER_PORT", std::to_string(port))
      .set("CANOPY_STORE_HOSTED", "1")
      .set("CANOPY_JOB_TOKEN", token)
      .set("CANOPY_SOCKET_IFNAME", "lo")
      .set("CANOPY_TIMEOUT", "60");
}

}  // namespace canopy::testing
