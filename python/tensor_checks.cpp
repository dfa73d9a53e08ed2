#include "python/tensor_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/utils/tensor_dtypes.h>

#include <optional>

#include "common/error.hpp"

namespace canopy::pytorch {
namespace {

std::optional<DataType> canopy_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return DataType::Float32;
    case at::kDouble:
      return DataType::Float64;
    case at::kHalf:
      return DataType::Float16;
    case at::kBFloat16:
      return DataType::BFloat16;
    case at::kChar:
      return DataType::Int8;
    case at::kByte:
      return DataType::UInt8;
    case at::kInt:
      return DataType::Int32;
    case at::kLong:
      return DataType::Int64;
    default:
      return std::nullopt;
  }
}

std::string_view layout_name(at::Layout layout) {
  switch (layout) {
    case at::kSparse:
      return "sparse (COO)";
    case at::kSparseCsr:
      return "sparse CSR";
    case at::kSparseCsc:
      return "sparse CSC";
    case at::kSparseBsr:
      return "sparse BSR";
    case at::kSparseBsc:
      return "sparse BSC";
    case at::kMkldnn:
      return "MKL-DNN";
    default:
      return "non-strided";
  }
}

}  // namespace

std::string describe(const at::Tensor& tensor) {
  return fmt::format("torch.{} tensor of shape [{}]", torch::utils::getDtypeNames(tensor.scalar_type()).first,
                     fmt::join(tensor.sizes(), ", "));
}

void check_host_tensor(const at::Tensor& tensor, std::string_view call, std::string_view what) {
  if (!tensor.defined()) fail(ErrorCode::InvalidArgument, "canopy {}: {} is an undefined tensor", call, what);
  if (!tensor.device().is_cpu())
    fail(
        ErrorCode::InvalidArgument,
        "canopy {}: {} is on {}, but this build of canopy_torch takes CPU tensors only (copy it with .cpu(); "
        "docs/TORCH.md says where CUDA staging would plug in)",
        call, what, tensor.device().str());
  if (tensor.layout() != at::kStrided)
    fail(ErrorCode::InvalidArgument, "canopy {}: {} is a {} {}; canopy takes dense tensors (.to_dense())",
         call, what, layout_name(tensor.layout()), describe(tensor));
  if (!tensor.is_contiguous())
    fail(ErrorCode::InvalidArgument,
         "canopy {}: {} ({}, strides [{}]) is not contiguous; pass .contiguous() and copy the result back",
         call, what, describe(tensor), fmt::join(tensor.strides(), ", "));
}

const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, std::string_view call,
                                std::string_view what) {
  if (tensors.size() != 1)
    fail(ErrorCode::InvalidArgument,
         "canopy {}: takes exactly one {} per process, got {} (the multi-device list form is not supported)",
         call, what, tensors.size());
  check_host_tensor(tensors[0], call, what);
  return tensors[0];
}

void check_rank_list(const std::vector<at::Tensor>& list, std::size_t size, const at::Tensor& like,
                     std::string_view call, std::string_view what) {
  if (list.size() != size)
    fail(ErrorCode::InvalidArgument, "canopy {}: {} holds {} tensors; the group has {} ranks", call, what,
         list.size(), size);
  for (std::size_t r = 0; r < list.size(); ++r) {
    const std::string name = fmt::format("{} {}", what, r);
    check_host_tensor(list[r], call, name);
    if (list[r].scalar_type() != like.scalar_type() || list[r].numel() != like.numel())
      fail(ErrorCode::InvalidArgument, "canopy {}: {} is a {}, but the input is a {}", call, name,
           describe(list[r]), describe(like));
  }
}

DataType reduction_type(const at::Tensor& tensor, std::string_view call) {
  if (auto type = canopy_type(tensor.scalar_type())) return *type;
  fail(ErrorCode::InvalidArgument,
       "canopy {}: cannot reduce a {}; reductions take float32, float64, float16, bfloat16, int8, uint8, "
       "int32 "
       "or int64",
       call, describe(tensor));
}

ReduceOp reduce_op(const c10d::ReduceOp& op, std::string_view call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::Sum;
    case c10d::ReduceOp::AVG:
      return ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::Prod;
    case c10d::ReduceOp::MIN:
      return ReduceOp::Min;
    case c10d::ReduceOp::MAX:
      return ReduceOp::Max;
    case c10d::ReduceOp::BAND:
      fail(ErrorCode::InvalidArgument, "canopy {}: ReduceOp.BAND is not supported", call);
    case c10d::ReduceOp::BOR:
      fail(ErrorCode::InvalidArgument, "canopy {}: ReduceOp.BOR is not supported", call);
    case c10d::ReduceOp::BXOR:
      fail(ErrorCode::InvalidArgument, "canopy {}: ReduceOp.BXOR is not supported", call);
    case c10d::ReduceOp::PREMUL_SUM:
      fail(ErrorCode::InvalidArgument, "canopy {}: ReduceOp.PREMUL_SUM is not supported", call);
    default:
      break;
  }
  fail(ErrorCode::InvalidArgument, "canopy {}: unknown ReduceOp value {}", call, static_cast<int>(op.op_));
}

Elements moved_elements(const at::Tensor& tensor) {
  const auto count = static_cast<std::size_t>(tensor.numel());
  if (auto type = canopy_type(tensor.scalar_type())) return {*type, count, 1};
  const auto item = static_cast<std::size_t>(tensor.element_size());
  return {DataType::UInt8, count * item, item};
}

int checked_rank(std::int64_t rank, int size, std::string_view call, std::string_view what) {
  if (rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "canopy {}: {} {} is not a rank of this group of {}", call, what, rank,
         size);
  return static_cast<int>(rank);
}

}  // namespace canopy::pytorch
