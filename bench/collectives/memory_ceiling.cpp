#include "bench/collectives/memory_ceiling.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include "collectives/kernels/reduce_kernels.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "common/error.hpp"
#include "transport/shm/shm_options.hpp"

namespace canopy::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(60);

// Shared by the parent and its workers (MAP_SHARED): who has arrived at each step, and each step's time.
struct Board {
  std::atomic<int> arrived{0};
  double* seconds;  // [worker][step], the 2 * steps of a worker together (a copy's, then a reduce's)
};
constexpr std::size_t kBoardBytes = 64;  // the times follow on the next line

// Memory mapped shared (not copied on write: the children write it as the parent would), zeroed, touched.
void* map_shared(std::size_t bytes) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) fail_errno(fmt::format("memory ceiling: mmap of {} bytes", bytes));
  std::memset(memory, 1, bytes);
  return memory;
}

struct Mapping {
  void* memory;
  std::size_t bytes;
  ~Mapping() { ::munmap(memory, bytes); }
};

// A worker: copies, then reduces, each step begun with every worker at once. Only what is async-signal-safe
// after a fork of a threaded process: its own mappings, syscalls, the kernels (no allocation).
[[noreturn]] void work(int worker, int workers, int cpu, std::byte* buffers, std::size_t bytes, int steps,
                       Board* board) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ::sched_setaffinity(0, sizeof(set), &set);  // best effort: where not allowed, the scheduler spreads them
  std::byte* a = buffers;
  std::byte* b = buffers + bytes;
  std::byte* out = buffers + 2 * bytes;
  const std::size_t floats = bytes / sizeof(float);
  for (int step = 0; step < 2 * steps; ++step) {
    board->arrived.fetch_add(1);
    while (board->arrived.load() < (step + 1) * workers) ::sched_yield();
    const auto start = Clock::now();
    if (step < steps)
      std::memcpy(out, a, bytes);
    else
      collectives::reduce_to(DataType::Float32, ReduceOp::Sum, out, a, b, floats);
    board->seconds[worker * 2 * steps + step] = std::chrono::duration<double>(Clock::now() - start).count();
  }
  ::_exit(0);
}

// All workers together, for the median step of one phase: bytes / the slowest worker's time.
double rate(const Board* board, int workers, int steps, int phase, std::size_t bytes) {
  std::vector<double> rates;
  for (int step = 1; step < steps; ++step) {  // the first of each phase warms up
    double slowest = 0;
    for (int w = 0; w < workers; ++w)
      slowest = std::max(slowest, board->seconds[w * 2 * steps + phase * steps + step]);
    rates.push_back(static_cast<double>(bytes) * workers / slowest / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

MemoryRates measure_memory_rates(const std::vector<int>& cpus, const MemoryRateOptions& options) {
  const int workers = static_cast<int>(cpus.size());
  const int steps = options.repetitions + 1;
  if (workers < 1 || options.repetitions < 1 || options.bytes < sizeof(float))
    fail(ErrorCode::InvalidArgument, "memory ceiling: {} CPUs, {} repetitions of {} bytes", workers,
         options.repetitions, options.bytes);
  const std::size_t bytes = options.bytes / sizeof(float) * sizeof(float);
  const std::size_t board_bytes = kBoardBytes + sizeof(double) * workers * 2 * steps;
  Mapping board_memory{map_shared(board_bytes), board_bytes};
  auto* board = new (board_memory.memory) Board;
  board->seconds = reinterpret_cast<double*>(static_cast<std::byte*>(board_memory.memory) + kBoardBytes);
  Mapping buffers{map_shared(3 * bytes * workers), 3 * bytes * workers};

  std::vector<pid_t> children;
  for (int w = 0; w < workers; ++w) {
    const pid_t child = ::fork();
    if (child < 0) {
      for (pid_t c : children) ::kill(c, SIGKILL);
      for (pid_t c : children) ::waitpid(c, nullptr, 0);
      fail_errno("memory ceiling: fork");
    }
    if (child == 0)
      work(w, workers, cpus[w], static_cast<std::byte*>(buffers.memory) + 3 * bytes * w, bytes, steps, board);
    children.push_back(child);
  }
  const auto give_up = Clock::now() + kTimeout;
  bool all_ok = true;
  for (pid_t child : children) {
    int status = 0;
    while (::waitpid(child, &status, WNOHANG) == 0) {
      if (Clock::now() > give_up) ::kill(child, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!all_ok)
    fail(ErrorCode::Timeout, "memory ceiling: a worker did not finish within {} s", kTimeout.count());
  return {workers, rate(board, workers, steps, 0, bytes), rate(board, workers, steps, 1, bytes)};
}

double memory_bound_seconds(Collective collective, std::string_view algorithm, int ranks, std::uint64_t count,
                            std::size_t element_size, std::size_t chunk_bytes, int root, bool in_place,
                            const MemoryRates& rates, std::uint64_t single_copy_bytes) {
  const collectives::Algorithm* found = collectives::find_algorithm(collective, algorithm);
  if (found == nullptr || rates.copy_gbps <= 0 || rates.reduce_gbps <= 0) return 0;
  double copied = 0, reduced = 0;
  // Every rank on this one host, as the algorithms see the ranks that share its memory.
  auto one_host = std::make_shared<collectives::HostLayout>();
  one_host->host_of_rank.assign(static_cast<std::size_t>(ranks), 0);
  for (int rank = 0; rank < ranks; ++rank) {
    collectives::CollectiveCall call;
    call.hosts = one_host;
    call.collective = collective;
    call.rank = rank;
    call.size = ranks;
    call.count = count;
    call.root = root;
    call.chunk_count = std::max<std::uint64_t>(1, chunk_bytes / element_size);
    call.in_place = in_place;
    for (const collectives::Step& step : found->build(call).steps) {
      const double bytes =
          static_cast<double>(element_size) *
          (step.kind == collectives::StepKind::Send || step.kind == collectives::StepKind::Copy
               ? step.src.count
               : step.dst.count);
      if (step.kind == collectives::StepKind::Send &&
          transport::suits_single_copy(collective, static_cast<std::uint64_t>(bytes), single_copy_bytes))
        continue;  // the receiver's copy is the only one
      (step.kind == collectives::StepKind::RecvReduce ? reduced : copied) += bytes;
    }
  }
  return copied / (rates.copy_gbps * 1e9) + reduced / (rates.reduce_gbps * 1e9);
}

}  // namespace canopy::bench
