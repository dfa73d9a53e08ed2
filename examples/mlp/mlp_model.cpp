#include "examples/mlp/mlp_model.hpp"

#include <cstring>
#include <stdexcept>

namespace mlp {
namespace {

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Model::Model(const std::vector<int>& widths, std::uint64_t seed, bool zero_init) {
  if (widths.size() < 2) throw std::invalid_argument("mlp::Model: need at least input and output widths");
  std::uint64_t state = seed;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    Layer layer;
    layer.inputs = widths[l];
    layer.outputs = widths[l + 1];
    std::size_t n = static_cast<std::size_t>(layer.inputs) * static_cast<std::size_t>(layer.outputs);
    layer.weight.resize(n);
    double range = 1.0 / static_cast<double>(layer.inputs);
    for (double& w : layer.weight)
      w = zero_init ? 0.0 : (static_cast<double>(splitmix(state) >> 11) * 0x1p-53 * 2.0 - 1.0) * range;
    layer.bias.assign(static_cast<std::size_t>(layer.outputs), 0.0);
    layer.weight_grad.assign(n, 0.0);
    layer.bias_grad.assign(layer.bias.size(), 0.0);
    layers_.push_back(std::move(layer));
  }
  z_.resize(layers_.size());
  a_.resize(layers_.size() + 1);
}

double Model::forward_backward(const std::vector<double>& x, const std::vector<double>& y, int batch,
                               double scale, const std::function<void(std::size_t)>& layer_ready) {
  const std::size_t depth = layers_.size();
  const auto b = static_cast<std::size_t>(batch);
  a_[0] = x;
  for (std::size_t l = 0; l < depth; ++l) {
    const Layer& layer = layers_[l];
    const auto in = static_cast<std::size_t>(layer.inputs), out = static_cast<std::size_t>(layer.outputs);
    z_[l].assign(b * out, 0.0);
    for (std::size_t s = 0; s < b; ++s)
      for (std::size_t o = 0; o < out; ++o) {
        double sum = layer.bias[o];
        for (std::size_t i = 0; i < in; ++i) sum += layer.weight[o * in + i] * a_[l][s * in + i];
        z_[l][s * out + o] = sum;
      }
    a_[l + 1] = z_[l];
    if (l + 1 < depth)
      for (double& v : a_[l + 1]) v = v > 0 ? v : 0;  // ReLU between layers, none after the last
  }

  // d = dLoss/d(output) per sample, before the 1/batch of the mean (applied once, in `factor`).
  std::vector<double> d(a_[depth].size());
  double loss = 0;
  for (std::size_t k = 0; k < d.size(); ++k) {
    d[k] = a_[depth][k] - y[k];
    loss += 0.5 * d[k] * d[k];
  }
  const double factor = scale / static_cast<double>(batch);
  for (std::size_t l = depth; l-- > 0;) {
    Layer& layer = layers_[l];
    const auto in = static_cast<std::size_t>(layer.inputs), out = static_cast<std::size_t>(layer.outputs);
    // Sum over the batch first, then scale: the sum of integers stays exact (the tests rely on it).
    for (std::size_t o = 0; o < out; ++o) {
      for (std::size_t i = 0; i < in; ++i) {
        double sum = 0;
        for (std::size_t s = 0; s < b; ++s) sum += d[s * out + o] * a_[l][s * in + i];
        layer.weight_grad[o * in + i] += factor * sum;
      }
      double sum = 0;
      for (std::size_t s = 0; s < b; ++s) sum += d[s * out + o];
      layer.bias_grad[o] += factor * sum;
    }
    if (l > 0) {
      std::vector<double> previous(b * in, 0.0);
      for (std::size_t s = 0; s < b; ++s)
        for (std::size_t i = 0; i < in; ++i) {
          if (z_[l - 1][s * in + i] <= 0) continue;  // ReLU'
          double sum = 0;
          for (std::size_t o = 0; o < out; ++o) sum += d[s * out + o] * layer.weight[o * in + i];
          previous[s * in + i] = sum;
        }
      d = std::move(previous);
    }
    if (layer_ready) layer_ready(l);
  }
  return loss / static_cast<double>(batch);
}

void Model::sgd_step(double learning_rate) {
  for (Layer& layer : layers_) {
    for (std::size_t k = 0; k < layer.weight.size(); ++k)
      layer.weight[k] -= learning_rate * layer.weight_grad[k];
    for (std::size_t k = 0; k < layer.bias.size(); ++k) layer.bias[k] -= learning_rate * layer.bias_grad[k];
  }
  zero_grad();
}

void Model::zero_grad() {
  for (Layer& layer : layers_) {
    std::fill(layer.weight_grad.begin(), layer.weight_grad.end(), 0.0);
    std::fill(layer.bias_grad.begin(), layer.bias_grad.end(), 0.0);
  }
}

std::string Model::serialize() const {
  std::string bytes;
  for (const Layer& layer : layers_) {
    bytes.append(reinterpret_cast<const char*>(layer.weight.data()), layer.weight.size() * sizeof(double));
    bytes.append(reinterpret_cast<const char*>(layer.bias.data()), layer.bias.size() * sizeof(double));
  }
  return bytes;
}

void Model::deserialize(const std::string& bytes) {
  std::size_t expected = 0;
  for (const Layer& layer : layers_) expected += (layer.weight.size() + layer.bias.size()) * sizeof(double);
  if (bytes.size() != expected)
    throw std::runtime_error("mlp::Model: checkpoint holds " + std::to_string(bytes.size()) +
                             " bytes, this model " + std::to_string(expected) + " (another --layers?)");
  std::size_t at = 0;
  for (Layer& layer : layers_) {
    std::memcpy(layer.weight.data(), bytes.data() + at, layer.weight.size() * sizeof(double));
    at += layer.weight.size() * sizeof(double);
    std::memcpy(layer.bias.data(), bytes.data() + at, layer.bias.size() * sizeof(double));
    at += layer.bias.size() * sizeof(double);
  }
}

std::uint64_t Model::fingerprint() const {
  std::uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : serialize()) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

}  // namespace mlp
