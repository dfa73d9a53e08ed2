// The "backward pass" of gradsync_overlap_bench: it produces each layer's gradient, in reverse layer order,
// either on the host (real work or a wait) or on a CUDA device (gradients in device memory, each one
// produced on a stream after the layer's compute time), so that the same steps measure both.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "canopy/gradsync.hpp"

namespace canopy::bench {

struct BackwardSettings {
  int layers = 8;
  double layer_mib = 2;
  std::string backward = "fma";  // fma: CPU work; wait: an accelerator computes, the host thread waits
  int compute_passes = 6;        // fma: passes over each gradient
  double wait_ms = 5;            // wait: ms per layer
  std::string device = "cpu";    // cpu or cuda: where the gradients live

  std::size_t floats_per_layer() const { return static_cast<std::size_t>(layer_mib * (1 << 20) / 4); }
};

class Backward {
 public:
  virtual ~Backward() = default;
  virtual TensorView gradient(std::size_t layer) = 0;
  // Starts producing `layer`'s gradient for `step`. Returns the CUDA stream on which it becomes final
  // (what mark_ready takes), or nullptr when it is final on return.
  virtual void* produce(std::size_t layer, int step) = 0;
  // Returns once every gradient produced so far is final: the end of backward.
  virtual void wait() = 0;
  // "backward waits 5 ms per layer", for the report.
  virtual std::string describe() const = 0;
};

std::unique_ptr<Backward> make_host_backward(const BackwardSettings& settings);

// Device memory and one producer stream on device 0. The layer's compute time is a host function of
// --wait-ms enqueued on the stream (no kernel needed: the stream is busy for that long, as it would be
// computing), then a device-to-device copy writes the gradient. The calling thread runs ahead as a
// trainer's does while its GPU works. Throws when Canopy was built without CUDA or no device is usable.
std::unique_ptr<Backward> make_cuda_backward(const BackwardSettings& settings);

}  // namespace canopy::bench
