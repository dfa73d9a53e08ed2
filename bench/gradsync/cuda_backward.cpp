#include <cuda_runtime.h>
#include <fmt/format.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/gradsync/backward.hpp"

namespace canopy::bench {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(
        fmt::format("{}: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status)));
}

// Runs on CUDA's callback thread and holds the stream for the layer's compute time.
void CUDART_CB compute_for(void* milliseconds) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(*static_cast<double*>(milliseconds)));
}

class CudaBackward final : public Backward {
 public:
  explicit CudaBackward(const BackwardSettings& s) : s_(s), grads_(static_cast<std::size_t>(s.layers)) {
    check(cudaSetDevice(0), "cudaSetDevice");
    const std::size_t bytes = s.floats_per_layer() * sizeof(float);
    for (float*& grad : grads_) check(cudaMalloc(&grad, bytes), "cudaMalloc (gradient)");
    check(cudaMalloc(&source_, bytes), "cudaMalloc (source)");
    std::vector<float> ones(s.floats_per_layer(), 1.0f);
    check(cudaMemcpy(source_, ones.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy (source)");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }

  ~CudaBackward() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    for (float* grad : grads_) cudaFree(grad);
    cudaFree(source_);
  }

  TensorView gradient(std::size_t layer) override {
    return {grads_[layer], s_.floats_per_layer(), DataType::Float32, Device::CUDA};
  }

  void* produce(std::size_t layer, int) override {
    if (s_.wait_ms > 0) check(cudaLaunchHostFunc(stream_, compute_for, &s_.wait_ms), "cudaLaunchHostFunc");
    check(cudaMemcpyAsync(grads_[layer], source_, s_.floats_per_layer() * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync (gradient)");
    return stream_;
  }

  void wait() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  std::string describe() const override {
    return fmt::format("CUDA gradients, the GPU computes {} ms per layer", s_.wait_ms);
  }

 private:
  BackwardSettings s_;
  std::vector<float*> grads_;
  float* source_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Backward> make_cuda_backward(const BackwardSettings& settings) {
  return std::make_unique<CudaBackward>(settings);
}

}  // namespace canopy::bench
