// The glue between a libtorch module and Canopy's GradientSynchronizer, as a PyTorch C++ user writes it:
// every parameter's .grad becomes a buffer the synchronizer knows, and a hook after the parameter's
// gradient accumulator (autograd calls it during backward, as soon as that gradient is in .grad) hands it
// over, so that a bucket can leave while backward goes on computing earlier layers.
#pragma once

#include <torch/nn/module.h>  // not <torch/torch.h>: half the compile time and memory

#include <memory>
#include <vector>

#include "canopy/gradsync.hpp"

namespace torch_example {

// The memory of a CPU or CUDA float32/float64 tensor, as the synchronizer sees it.
canopy::TensorView view_of(const torch::Tensor& tensor);

// Registers every parameter of `module` (gradient and value, in forward order) with `sync` and installs
// the hooks. The .grad buffers are allocated here and must stay: clear them with zero_grads(), never with
// optimizer.zero_grad() (which may set them to None in later libtorch versions, leaving the synchronizer
// with dangling pointers). The synchronizer holds the parameters' memory too: attach after anything that
// gives parameters new storage (Module::load does, with Tensor::set_), and update them in place afterwards
// (optimizers do). No backward with create_graph (autograd would then replace .grad rather than add into
// it). Keep the returned hooks, and `sync`, for as long as `module` runs backward passes.
using Hooks = std::vector<std::shared_ptr<torch::autograd::Node>>;  // the gradient accumulators (autograd
                                                                    // holds them only weakly)
[[nodiscard]] Hooks attach(torch::nn::Module& module, canopy::GradientSynchronizer& sync);

// Zeroes every parameter's gradient in place (the buffers the synchronizer holds).
void zero_grads(torch::nn::Module& module);

// Every parameter's values, in registration order, as one float32 byte string (replica checks, --out).
std::string flat_parameters(torch::nn::Module& module);

}  // namespace torch_example
