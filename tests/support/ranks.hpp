// Running the ranks of a test group as real processes (fork) or as threads of this process.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/process_group.hpp"

namespace canopy::testing {

// How one forked rank ended (ok(), describe()).
using RankExit = ProcessEnd;

// Forks `n` processes running body(rank) (a ProcessGroup: mind its note on threads). A rank whose body
// returns exits 0; one whose body throws prints the exception to stderr and exits 1. Ranks still running
// after `timeout` are killed.
std::vector<RankExit> run_processes(int n, const std::function<void(int rank)>& body,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Runs body(rank) on `n` threads and rethrows the first exception any of them threw.
void run_threads(int n, const std::function<void(int rank)>& body);

// Throws std::runtime_error with the message unless `condition` holds: an assertion that works in a
// forked child or a thread (gtest's EXPECT macros only count in the main process).
template <typename... Args>
void require(bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) throw std::runtime_error(fmt::format(format, std::forward<Args>(args)...));
}

// A fresh empty directory under `parent` (default $TMPDIR), removed with its content by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& parent = "");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace canopy::testing
