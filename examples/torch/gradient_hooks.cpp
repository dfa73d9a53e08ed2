#include "examples/torch/gradient_hooks.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <stdexcept>

namespace torch_example {

canopy::TensorView view_of(const torch::Tensor& tensor) {
  if (!tensor.is_contiguous()) throw std::invalid_argument("the synchronizer needs contiguous tensors");
  canopy::DataType dtype;
  if (tensor.scalar_type() == torch::kFloat32)
    dtype = canopy::DataType::Float32;
  else if (tensor.scalar_type() == torch::kFloat64)
    dtype = canopy::DataType::Float64;
  else
    throw std::invalid_argument("this example synchronizes float32 and float64 parameters only");
  return {tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), dtype,
          tensor.is_cuda() ? canopy::Device::CUDA : canopy::Device::CPU};
}

Hooks attach(torch::nn::Module& module, canopy::GradientSynchronizer& sync) {
  Hooks hooks;
  for (auto& item : module.named_parameters()) {
    torch::Tensor parameter = item.value();
    parameter.mutable_grad() = torch::zeros_like(parameter);
    std::size_t index = sync.add(item.key(), view_of(parameter.grad()), view_of(parameter));
    // As DDP does: a hook after the parameter's gradient accumulator, which has just added this backward's
    // gradient into .grad (in place: .grad exists and no graph of the backward is being built). .grad is
    // then final, what earlier no-sync micro-steps accumulated included, and autograd touches it no more
    // in this backward: from here until finish() it is the synchronizer's (a large gradient is averaged in
    // place while backward goes on). The hook captures the index, not the parameter: the accumulator
    // holds the parameter, and a parameter's hook holding it back would never be freed.
    std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(parameter);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [&sync, index](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          sync.mark_ready(index);
          return outputs;
        }));
    hooks.push_back(std::move(accumulator));
  }
  return hooks;
}

void zero_grads(torch::nn::Module& module) {
  for (torch::Tensor& parameter : module.parameters()) parameter.grad().zero_();
}

std::string flat_parameters(torch::nn::Module& module) {
  std::string bytes;
  for (const torch::Tensor& parameter : module.parameters()) {
    torch::Tensor values = parameter.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    bytes.append(static_cast<const char*>(values.data_ptr()), static_cast<std::size_t>(values.nbytes()));
  }
  return bytes;
}

}  // namespace torch_example
