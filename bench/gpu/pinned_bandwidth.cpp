// Device <-> host copy bandwidth, pinned vs pageable, one direction and both at once on two streams:
// the numbers that bound CUDA gradient staging (a bucket crosses PCIe/NVLink-C2C twice per step, and the
// staging pipeline relies on device-to-host and host-to-device running concurrently).
// Plain C++ on the CUDA runtime: `pinned_bandwidth [max_mib]`, prints a table; exits 0 with the reason
// when there is no GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "pinned_bandwidth: %s: %s\n", what, cudaGetErrorString(status));
  return false;
}

// Milliseconds for `repeat` copies of `bytes` on `stream`, timed by events.
float time_copies(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                  int repeat) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  for (int i = 0; i < repeat; ++i) cudaMemcpyAsync(dst, src, bytes, kind, stream);
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

double gbps(std::size_t bytes, int repeat, float ms) {
  return ms > 0 ? bytes * static_cast<double>(repeat) / (ms * 1e6) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("skipped: no usable CUDA device (%s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount returned 0");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device 0: %s, %d devices\n", prop.name, devices);
  std::size_t max_mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  std::size_t max_bytes = max_mib << 20;

  void *device_a, *device_b, *pinned_a, *pinned_b;
  if (!ok(cudaMalloc(&device_a, max_bytes), "cudaMalloc") ||
      !ok(cudaMalloc(&device_b, max_bytes), "cudaMalloc") ||
      !ok(cudaHostAlloc(&pinned_a, max_bytes, cudaHostAllocDefault), "cudaHostAlloc") ||
      !ok(cudaHostAlloc(&pinned_b, max_bytes, cudaHostAllocDefault), "cudaHostAlloc"))
    return 1;
  std::vector<char> pageable(max_bytes, 1);
  cudaStream_t s1, s2;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);

  std::printf("%10s %12s %12s %14s %14s %16s\n", "MiB", "D2H pinned", "H2D pinned", "D2H pageable",
              "H2D pageable", "both pinned sum");
  for (std::size_t mib = 1; mib <= max_mib; mib *= 4) {
    std::size_t bytes = mib << 20;
    int repeat = mib >= 64 ? 3 : 10;
    time_copies(pinned_a, device_a, bytes, cudaMemcpyDeviceToHost, s1, 1);  // warm up
    double d2h =
        gbps(bytes, repeat, time_copies(pinned_a, device_a, bytes, cudaMemcpyDeviceToHost, s1, repeat));
    double h2d =
        gbps(bytes, repeat, time_copies(device_a, pinned_a, bytes, cudaMemcpyHostToDevice, s1, repeat));
    double d2h_page =
        gbps(bytes, 1, time_copies(pageable.data(), device_a, bytes, cudaMemcpyDeviceToHost, s1, 1));
    double h2d_page =
        gbps(bytes, 1, time_copies(device_a, pageable.data(), bytes, cudaMemcpyHostToDevice, s1, 1));
    // Both directions at once, as the staging pipeline runs them.
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaDeviceSynchronize();
    cudaEventRecord(start, s1);
    cudaStreamWaitEvent(s2, start, 0);
    for (int i = 0; i < repeat; ++i) {
      cudaMemcpyAsync(pinned_a, device_a, bytes, cudaMemcpyDeviceToHost, s1);
      cudaMemcpyAsync(device_b, pinned_b, bytes, cudaMemcpyHostToDevice, s2);
    }
    cudaEvent_t s2_done;
    cudaEventCreate(&s2_done);
    cudaEventRecord(s2_done, s2);
    cudaStreamWaitEvent(s1, s2_done, 0);
    cudaEventRecord(stop, s1);
    cudaEventSynchronize(stop);
    float both_ms = 0;
    cudaEventElapsedTime(&both_ms, start, stop);
    double both = gbps(2 * bytes, repeat, both_ms);
    std::printf("%10zu %12.1f %12.1f %14.1f %14.1f %16.1f\n", mib, d2h, h2d, d2h_page, h2d_page, both);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaEventDestroy(s2_done);
  }
  std::printf("GB/s (1e9 bytes per second)\n");
  cudaFree(device_a);
  cudaFree(device_b);
  cudaFreeHost(pinned_a);
  cudaFreeHost(pinned_b);
  return 0;
}
