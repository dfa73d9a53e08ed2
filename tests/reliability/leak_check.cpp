#include "tests/reliability/leak_check.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace canopy::reliability {
namespace {

int entries(const char* directory) {
  int n = 0;
  std::error_code ignored;
  for (auto it = std::filesystem::directory_iterator(directory, ignored);
       it != std::filesystem::directory_iterator(); it.increment(ignored))
    ++n;
  return n;
}

// The mappings of memfds named "canopy-ring" (transport/shm/shm_ring.cpp).
int ring_mappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("canopy-ring") != std::string::npos;
  return n;
}

}  // namespace

Holdings current_holdings() {
  return {entries("/proc/self/fd"), entries("/proc/self/task"), ring_mappings()};
}

std::string leaks_since(const Holdings& before) {
  // A thread that was joined can linger in /proc for a moment: look again before calling it a leak.
  Holdings now = current_holdings();
  for (int retry = 0; retry < 50 && now.threads > before.threads; ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = current_holdings();
  }
  std::vector<std::string> leaked;
  if (now.descriptors > before.descriptors)
    leaked.push_back(fmt::format("{} descriptors", now.descriptors - before.descriptors));
  if (now.threads > before.threads) leaked.push_back(fmt::format("{} threads", now.threads - before.threads));
  if (now.rings > before.rings) leaked.push_back(fmt::format("{} rings", now.rings - before.rings));
#if defined(__SANITIZE_ADDRESS__)
  if (__lsan_do_recoverable_leak_check() != 0) leaked.push_back("heap (see LeakSanitizer's report above)");
#endif
  return leaked.empty() ? "leaked nothing" : fmt::format("LEAKED {}", fmt::join(leaked, ", "));
}

long long resident_bytes(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;  // "VmRSS:  1234 kB"
  return -1;
}

}  // namespace canopy::reliability
