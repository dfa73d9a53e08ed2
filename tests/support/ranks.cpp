#include "tests/support/ranks.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

namespace canopy::testing {

std::vector<RankExit> run_processes(int n, const std::function<void(int rank)>& body,
                                    std::chrono::milliseconds timeout) {
  ProcessGroup group(n, [&](int rank, const Reporter&) { body(rank); });
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int rank = 0; rank < n; ++rank) all[static_cast<std::size_t>(rank)] = rank;
  if (!group.wait_ended(all, Clock::now() + timeout)) group.kill_unfinished();
  std::vector<RankExit> exits;
  for (int rank = 0; rank < n; ++rank) exits.push_back(group.end(rank));
  return exits;
}

void run_threads(int n, const std::function<void(int rank)>& body) {
  std::mutex mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

TempDir::TempDir(const std::string& parent) {
  const std::filesystem::path base =
      parent.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(parent);
  std::string pattern = (base / "canopy-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace canopy::testing
