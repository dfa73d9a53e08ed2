// A communicator's one progress thread: asynchronous collectives and point-to-point messages share it, and
// neither holds the other back: messages move while an asynchronous collective waits (for its messages or
// in the host's cells), and a pending receive leaves the collectives alone. Between real processes.
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"

namespace canopy {
namespace {

using testing::require;

// The threads of this process, from /proc/self/task.
int threads_of_this_process() {
  const auto tasks = std::filesystem::directory_iterator("/proc/self/task");
  return static_cast<int>(std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks)));
}

void run_group(int ranks, const std::function<void(Communicator&)>& body) {
  testing::run_group(ranks, body, testing::group_options("progress-thread-test"));
}

template <typename T>
std::span<std::byte> bytes_of(std::vector<T>& v) {
  return std::as_writable_bytes(std::span(v));
}

// Counted after the communicator formed and ran a blocking call (whatever it starts for itself, its
// liveness monitor included, is running then), and again while asynchronous collectives and messages in
// both directions are in flight at once: one thread more, the progress thread, which serves both.
TEST(ProgressThread, AsynchronousCollectivesAndPointToPointShareOneThread) {
  run_group(3, [](Communicator& comm) {
    std::vector<float> small(16, 1.0f);
    comm.all_reduce(std::span(small));
    const int before = threads_of_this_process();

    const int next = (comm.rank() + 1) % comm.size(), previous = (comm.rank() + 2) % comm.size();
    std::vector<float> gradients(1 << 20, 1.0f);
    std::vector<std::uint8_t> out(std::size_t{1} << 20, static_cast<std::uint8_t>(comm.rank())),
        in(out.size());
    Work reduce = comm.all_reduce_async(std::span(gradients));
    Work received = comm.recv_async(bytes_of(in), previous, 1);
    Work sent = comm.send_async(std::as_bytes(std::span(out)), next, 1);
    Work reduce_small = comm.all_reduce_async(std::span(small));
    const int during = threads_of_this_process();
    reduce.wait();
    sent.wait();
    received.wait();
    reduce_small.wait();
    const int after = threads_of_this_process();

    require(during == before + 1 && after == before + 1,
            "rank {}: {} threads before, {} with collectives and messages in flight, {} after: the progress "
            "thread should be the only one more",
            comm.rank(), before, during, after);
    require(in[12345] == previous && gradients[777] == 3.0f && small[0] == 9.0f,
            "rank {}: wrong results: {} {} {}", comm.rank(), in[12345], gradients[777], small[0]);
  });
}

// Rank 0's asynchronous all-reduce waits for rank 1 on the progress thread, while rank 1 first waits for a
// message that rank 0 sent after starting the all-reduce (larger than the eager limit, so rank 0's engine
// must answer rank 1's clear-to-send while the collective waits). Through the host's cells, over shared
// memory rings, and over TCP: each wait keeps the messages moving. Rank 1 also leaves a receive pending
// across its all-reduce, which must not hold the collective back.
TEST(ProgressThread, MessagesMoveWhileAnAsynchronousCollectiveWaits) {
  struct Case {
    std::string transport;
    std::string algorithm;
    std::size_t floats;
  };
  for (const Case& c : {Case{"shm+tcp", "one-shot", 16}, Case{"shm+tcp", "ring", std::size_t{1} << 20},
                        Case{"tcp", "ring", std::size_t{1} << 20}}) {
    SCOPED_TRACE(c.transport + " " + c.algorithm);
    testing::ScopedEnv environment;
    environment.set("CANOPY_TRANSPORT", c.transport);
    run_group(2, [&c](Communicator& comm) {
      std::vector<float> data(c.floats, 1.0f);
      std::vector<std::uint32_t> message(std::size_t{1} << 18, 7);
      if (comm.rank() == 0) {
        Work reduce = comm.all_reduce_async(std::span(data), ReduceOp::Sum, {.algorithm = c.algorithm});
        comm.send(std::as_bytes(std::span(message)), 1, 2);
        reduce.wait();
        comm.send(std::as_bytes(std::span(message)), 1, 3);
      } else {
        std::vector<std::uint32_t> first(message.size()), later(message.size());
        comm.recv(bytes_of(first), 0, 2);
        Work pending = comm.recv_async(bytes_of(later), 0, 3);  // sent after the all-reduce
        comm.all_reduce_async(std::span(data), ReduceOp::Sum, {.algorithm = c.algorithm}).wait();
        pending.wait();
        require(first == message && later == message, "the messages arrived wrong");
      }
      require(data[0] == 2.0f && data.back() == 2.0f, "rank {}: all-reduce gave {}", comm.rank(), data[0]);
    });
  }
}

}  // namespace
}  // namespace canopy
