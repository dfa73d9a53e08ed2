// A small fully connected network with its gradient written out by hand (no autograd library): what the
// dependency-free trainer and the equivalence tests train. float64, ReLU between layers, squared error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mlp {

struct Layer {
  int inputs = 0, outputs = 0;
  std::vector<double> weight, bias;            // weight is outputs x inputs, row-major
  std::vector<double> weight_grad, bias_grad;  // accumulated until zero_grad()
};

class Model {
 public:
  // widths = {inputs, hidden..., outputs}; weights drawn from `seed` (scaled uniform), biases zero.
  // `zero_init` starts every weight at 0 (the exact-arithmetic configuration of the tests).
  Model(const std::vector<int>& widths, std::uint64_t seed, bool zero_init = false);

  std::vector<Layer>& layers() { return layers_; }
  const std::vector<Layer>& layers() const { return layers_; }

  // Forward and backward over `batch` samples (x: batch x inputs, y: batch x outputs, row-major) for the
  // loss scale * mean over the batch of 1/2 |f(x) - y|^2. Gradients are ADDED to the accumulators (gradient
  // accumulation), and layer_ready(l) is called as soon as layer l's gradients are final: the last layer
  // first, as autograd's hooks fire. Returns the unscaled mean loss.
  double forward_backward(const std::vector<double>& x, const std::vector<double>& y, int batch, double scale,
                          const std::function<void(std::size_t layer)>& layer_ready);

  void sgd_step(double learning_rate);  // w -= lr * grad, then zero_grad()
  void zero_grad();

  std::string serialize() const;  // every weight and bias, native float64 bytes
  void deserialize(const std::string& bytes);
  std::uint64_t fingerprint() const;  // hash of the weights' bits: replicas compare it

 private:
  std::vector<Layer> layers_;
  // Scratch reused across steps: pre-activations and activations per layer.
  std::vector<std::vector<double>> z_, a_;
};

}  // namespace mlp
