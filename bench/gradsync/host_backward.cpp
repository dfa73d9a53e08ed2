#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "bench/gradsync/backward.hpp"

namespace canopy::bench {
namespace {

class HostBackward final : public Backward {
 public:
  explicit HostBackward(const BackwardSettings& s)
      : s_(s),
        grads_(static_cast<std::size_t>(s.layers), std::vector<float>(s.floats_per_layer(), 1.0f)),
        input_(s.floats_per_layer(), 0.5f) {}

  TensorView gradient(std::size_t layer) override { return tensor_view(std::span(grads_[layer])); }

  void* produce(std::size_t layer, int step) override {
    if (s_.backward == "wait") {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(s_.wait_ms));
      return nullptr;
    }
    std::vector<float>& grad = grads_[layer];
    const float a = 0.999f, b = 1e-3f * static_cast<float>(step % 7);
    for (int p = 0; p < s_.compute_passes; ++p)
      for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = std::fma(grad[i], a, input_[i] * b);
    return nullptr;
  }

  void wait() override {}

  std::string describe() const override {
    return s_.backward == "wait" ? fmt::format("backward waits {} ms per layer", s_.wait_ms)
                                 : fmt::format("backward {} FMA passes", s_.compute_passes);
  }

 private:
  BackwardSettings s_;
  std::vector<std::vector<float>> grads_;
  std::vector<float> input_;
};

}  // namespace

std::unique_ptr<Backward> make_host_backward(const BackwardSettings& settings) {
  return std::make_unique<HostBackward>(settings);
}

}  // namespace canopy::bench
