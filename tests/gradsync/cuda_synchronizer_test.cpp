// CUDA gradients through pinned host staging, between two forked ranks sharing the machine's GPU: several
// buckets, several chunks per bucket, gradients written by a copy on the trainer's own stream just before
// mark_ready (the staging copy must wait for it), parameters broadcast from rank 0's device memory.
// Without a GPU the real test skips with the reason, and the error a trainer would get is checked instead.
// CUDA is only ever touched in forked children: a CUDA context does not survive fork().
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "canopy/canopy.hpp"
#include "canopy/gradsync.hpp"
#include "gradsync/device_staging.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using testing::require;

CommunicatorOptions test_options() {
  return testing::group_options("gradsync-cuda-test", std::chrono::seconds(30));
}

// Asks a child process, so that this process never initialises CUDA before forking the ranks.
int device_count_in_child(std::string* why) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    std::string reason;
    int count = gradsync::cuda_device_count(&reason);
    std::string message = std::to_string(count) + " " + reason;
    ssize_t ignored = write(pipe_fds[1], message.data(), message.size());
    (void)ignored;
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0)
    message.append(buffer, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  int count = message.empty() ? 0 : std::stoi(message);
  if (why) *why = message.substr(message.find(' ') + 1);
  return count;
}

void check(cudaError_t status, const char* what) {
  require(status == cudaSuccess, "{}: {}", what, cudaGetErrorString(status));
}

void run_two_ranks(const std::function<void(Communicator&)>& body) {
  testing::run_group(2, body, test_options(), std::chrono::seconds(90));
}

TEST(CudaGradientSynchronizer, WithoutADeviceTheErrorSaysWhy) {
  std::string why;
  if (device_count_in_child(&why) > 0) GTEST_SKIP() << "a GPU is present; the GPU tests below run instead";
  run_two_ranks([](Communicator& comm) {
    GradientSynchronizer sync(comm);
    sync.add("w", {reinterpret_cast<void*>(0x1000), 16, DataType::Float32, Device::CUDA});
    try {
      sync.mark_ready(0);
    } catch (const Error& e) {
      require(std::string(e.what()).find("CUDA") != std::string::npos, "unclear: {}", e.what());
      return;
    }
    throw std::runtime_error("CUDA gradients were accepted without a device");
  });
}

TEST(CudaGradientSynchronizer, AveragesDeviceGradientsThroughPinnedStaging) {
  std::string why;
  if (device_count_in_child(&why) == 0) GTEST_SKIP() << why;
  run_two_ranks([](Communicator& comm) {
    check(cudaSetDevice(0), "cudaSetDevice");
    const int r = comm.rank();
    const std::vector<std::size_t> sizes{300000, 7, 1 << 20, 4096, 250000};  // floats: several buckets
    std::vector<float*> device(sizes.size());
    for (std::size_t g = 0; g < sizes.size(); ++g)
      check(cudaMalloc(&device[g], sizes[g] * sizeof(float)), "cudaMalloc");
    cudaStream_t producer;
    check(cudaStreamCreate(&producer), "cudaStreamCreate");
    GradSyncOptions options;
    options.first_bucket_bytes = 1 << 20;
    options.bucket_bytes = 2 << 20;
    options.cuda_chunk_bytes = 256 << 10;  // several chunks per bucket
    GradientSynchronizer sync(comm, options);
    for (std::size_t g = 0; g < sizes.size(); ++g)
      sync.add("g" + std::to_string(g), {device[g], sizes[g], DataType::Float32, Device::CUDA});
    require(sync.buckets().size() >= 3, "only {} buckets", sync.buckets().size());
    std::vector<std::vector<float>> host(sizes.size());
    for (int step = 0; step < 3; ++step) {
      for (std::size_t g = sizes.size(); g-- > 0;) {  // backward order
        host[g].assign(sizes[g], 0.0f);
        for (std::size_t i = 0; i < sizes[g]; ++i)
          host[g][i] = static_cast<float>((r + 1) * (i % 101) + g + step);
        // The gradient is produced on the trainer's stream; mark_ready must order the staging copy after it.
        check(cudaMemcpyAsync(device[g], host[g].data(), sizes[g] * sizeof(float), cudaMemcpyHostToDevice,
                              producer),
              "cudaMemcpyAsync");
        sync.mark_ready(g, producer);
      }
      sync.finish();
      for (std::size_t g = 0; g < sizes.size(); ++g) {
        std::vector<float> back(sizes[g]);
        check(cudaMemcpy(back.data(), device[g], sizes[g] * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
        for (std::size_t i = 0; i < sizes[g]; ++i) {
          float expected =
              (static_cast<float>(1 * (i % 101) + g + step) + static_cast<float>(2 * (i % 101) + g + step)) /
              2;
          require(back[i] == expected, "step {} gradient {}[{}]: {} != {}", step, g, i, back[i], expected);
        }
      }
    }
    // Parameters on the device: rank 0's values everywhere.
    float* parameter;
    float* gradient;
    check(cudaMalloc(&parameter, 1000 * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&gradient, 1000 * sizeof(float)), "cudaMalloc");
    std::vector<float> mine(1000, static_cast<float>(r + 5));
    check(cudaMemcpy(parameter, mine.data(), 1000 * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    GradientSynchronizer params(comm);
    params.add("p", {gradient, 1000, DataType::Float32, Device::CUDA},
               {parameter, 1000, DataType::Float32, Device::CUDA});
    params.broadcast_parameters();
    check(cudaMemcpy(mine.data(), parameter, 1000 * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (float v : mine) require(v == 5.0f, "rank {}: parameter {} after broadcast", r, v);
  });
}

}  // namespace
}  // namespace canopy
