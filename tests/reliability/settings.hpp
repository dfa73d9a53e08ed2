// The knobs of the reliability tests: small by default so that `ctest` stays quick, scaled up through
// the environment for the runs docs/RELIABILITY.md records.
#pragma once

#include <chrono>
#include <cstdlib>
#include <string>

#include "canopy/communicator.hpp"
#include "tests/support/scoped_env.hpp"

namespace canopy::reliability {

// True in an AddressSanitizer or ThreadSanitizer build, where everything is several times slower
// and resident memory includes the sanitizer's quarantine and shadow.
constexpr bool kUnderSanitizer =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#else
    false;
#endif

// A positive integer from the environment, else `fallback`.
inline long long setting(const char* name, long long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  long long value = std::atoll(text);
  return value > 0 ? value : fallback;
}

// The deadline every rank's calls get: what the survivors of a failure must answer within.
inline std::chrono::milliseconds call_timeout() {
  return std::chrono::seconds(setting("CANOPY_CHAOS_TIMEOUT_S", kUnderSanitizer ? 6 : 3));
}

// Slack on top of the deadline for a loaded 2-core machine (process exit, reaping, the scheduler).
inline std::chrono::milliseconds exit_slack() {
  return std::chrono::seconds(kUnderSanitizer ? 20 : 10);
}

// Tests talk over loopback only (the transport would otherwise pick the first non-loopback interface).
// Set before forking, so that every rank inherits it; `env` restores the environment after the test.
inline void use_loopback_only(testing::ScopedEnv& env) {
  env.set("CANOPY_SOCKET_IFNAME", "lo");
}

// The liveness monitor's heartbeat, shorter than its default (1 s, silent after 10 s) so that trials stay
// quick: every 0.5 s, silent after 4 s (8 intervals; 12 under sanitizers). Set before forking; a value
// already in the environment wins (to run the trials at the defaults).
inline void use_quick_heartbeat(testing::ScopedEnv& env) {
  env.set_default("CANOPY_HEARTBEAT_SECONDS", "0.5");
  env.set_default("CANOPY_HEARTBEAT_TIMEOUT_SECONDS", kUnderSanitizer ? "6" : "4");
}

// The heartbeat timeout in force (what use_quick_heartbeat set, or the environment).
inline std::chrono::milliseconds heartbeat_timeout() {
  const char* text = std::getenv("CANOPY_HEARTBEAT_TIMEOUT_SECONDS");
  return std::chrono::milliseconds(static_cast<long long>((text ? std::atof(text) : 10.0) * 1000));
}

inline CommunicatorOptions test_communicator_options(std::chrono::milliseconds timeout = call_timeout()) {
  CommunicatorOptions options;
  options.timeout = timeout;
  options.job_token = "reliability-test";
  options.calibrate = false;  // no measurement at start-up: set-up stays short and the same every trial
  options.local_rank = 0;
  options.local_size = 1;
  return options;
}

}  // namespace canopy::reliability
