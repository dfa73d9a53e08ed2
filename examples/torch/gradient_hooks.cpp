#include "examples/torch/gradient_hooks.hpp"

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

void attach(torch::nn::Module& module, canopy::GradientSynchronizer& sync) {
  for (auto& item : module.named_parameters()) {
    torch::Tensor parameter = item.value();
    parameter.mutable_grad() = torch::zeros_like(parameter);
    std::size_t index = sync.add(item.key(), view_of(parameter.grad()), view_of(parameter));
    // A hook on a leaf runs before autograd adds the incoming gradient into .grad. It does the adding
    // itself (so that .grad is final, including what earlier no-sync micro-steps accumulated), tells the
    // synchronizer, and hands autograd zeros to add instead: the bucket may already be on its way, and
    // the gradient must not be counted twice. It captures the .grad buffer, not the parameter: a
    // parameter holding a hook that holds the parameter would never be freed.
    parameter.register_hook([&sync, buffer = parameter.grad(), index](const torch::Tensor& incoming) {
      buffer.add_(incoming);
      sync.mark_ready(index);
      return torch::zeros_like(incoming);
    });
  }
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
