// What Canopy accepts from torch, checked before anything is sent: one dense, contiguous CPU tensor per
// list, and, for reductions, one of Canopy's eight element types and five operators. Every refusal is
// Error(InvalidArgument) naming the call, the argument and what was passed, never a silent wrong result.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "canopy/types.hpp"

namespace canopy::pytorch {

// "float32 tensor of shape [4, 3]"
std::string describe(const at::Tensor& tensor);

// A dense (strided), contiguous tensor in host memory; `what` names it in the error ("tensor", "output 2").
void check_host_tensor(const at::Tensor& tensor, std::string_view call, std::string_view what);

// The one tensor of torch's list form (several tensors per process is the multi-device form, unsupported).
const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, std::string_view call,
                                std::string_view what = "tensor");

// A list of exactly `size` tensors (one per rank), each a host tensor with `like`'s dtype and element count.
void check_rank_list(const std::vector<at::Tensor>& list, std::size_t size, const at::Tensor& like,
                     std::string_view call, std::string_view what);

// The element type a reduction runs in; bool, complex, int16 and the rest are refused.
DataType reduction_type(const at::Tensor& tensor, std::string_view call);
ReduceOp reduce_op(const c10d::ReduceOp& op, std::string_view call);

// How a tensor travels in a call that only moves data: Canopy's own type where it has one (so that a
// mismatch names element counts and types), else raw bytes (bool, int16, complex...: exact either way).
struct Elements {
  DataType dtype = DataType::UInt8;
  std::size_t count = 0;     // elements of `dtype`
  std::size_t per_item = 1;  // Canopy elements per torch element (bytes of the type when sent as bytes)
};
Elements moved_elements(const at::Tensor& tensor);

// A root or a peer as torch passes it (int64), checked against the group.
int checked_rank(std::int64_t rank, int size, std::string_view call, std::string_view what);

}  // namespace canopy::pytorch
