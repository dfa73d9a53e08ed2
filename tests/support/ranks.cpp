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

std::string RankExit::describe() const {
  if (timed_out) return "timed out (killed by the harness)";
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  return fmt::format("exited with status {}", exit_code);
}

std::vector<RankExit> run_processes(int n, const std::function<void(int rank)>& body,
                                    std::chrono::milliseconds timeout) {
  std::fflush(nullptr);
  std::vector<pid_t> pids(n, -1);
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      std::abort();
    }
    if (pid == 0) {
      int status = 0;
      try {
        body(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] failed: %s\n", rank, e.what());
        status = 1;
      } catch (...) {
        std::fprintf(stderr, "[rank %d] failed with an unknown exception\n", rank);
        status = 1;
      }
      std::fflush(nullptr);
      _exit(status);  // no destructors of the parent's objects in the child
    }
    pids[rank] = pid;
  }

  std::vector<RankExit> exits(n);
  int remaining = n;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (remaining > 0) {
    // Only our own children: the test may have others (a StoreServerProcess) that it reaps itself.
    bool reaped = false;
    for (int rank = 0; rank < n; ++rank) {
      int status = 0;
      if (pids[rank] <= 0 || waitpid(pids[rank], &status, WNOHANG) != pids[rank]) continue;
      if (WIFEXITED(status)) exits[rank].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) exits[rank].signal = WTERMSIG(status);
      pids[rank] = -1;
      --remaining;
      reaped = true;
    }
    if (reaped) continue;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (int rank = 0; rank < n; ++rank) {
        if (pids[rank] <= 0) continue;
        exits[rank].timed_out = true;
        kill(pids[rank], SIGKILL);
      }
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
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
