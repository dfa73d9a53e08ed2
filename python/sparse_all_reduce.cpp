// all_reduce of a sparse COO tensor (trainers' sparse embedding gradients), as gloo does it: every rank's
// indices and values are all-gathered, then the union is coalesced, which sums the values of repeated
// indices. Ranks hold different numbers of entries, so each first learns every rank's count and shape,
// then the entries travel padded to the largest count. The shape exchange and the indices block the
// caller; the values' gather is the returned Work, whose completion builds the sum into the caller's
// tensor (sparse copy_ replaces its indices and values, as gloo's does).
#include <ATen/ATen.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/error.hpp"
#include "python/process_group.hpp"
#include "python/tensor_checks.hpp"

namespace canopy::pytorch {
namespace {

constexpr const char* kSparseCall = "all_reduce (sparse)";

// What each rank tells the others: sparse and dense dimensions, entries, then the sizes.
std::vector<std::int64_t> shape_of(const at::Tensor& sparse) {
  std::vector<std::int64_t> shape{sparse.sparse_dim(), sparse.dense_dim(), sparse._nnz()};
  for (std::int64_t size : sparse.sizes()) shape.push_back(size);
  return shape;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                                    const c10d::AllreduceOptions& opts) {
  at::Tensor& tensor = tensors[0];
  if (opts.reduceOp != c10d::ReduceOp::SUM)
    fail(ErrorCode::InvalidArgument, "canopy {}: sparse tensors are reduced with ReduceOp.SUM only", kSparseCall);
  if (!tensor.device().is_cpu())
    fail(ErrorCode::InvalidArgument, "canopy {}: tensor is on {}; canopy_torch takes CPU tensors only", kSparseCall,
         tensor.device().str());
  const at::Tensor input = tensor.coalesce();
  const CollectiveOptions options = call_options(opts.timeout, timeout_);
  auto gather_now = [&](const at::Tensor& from, at::Tensor& into) {
    const Elements moved = moved_elements(from);
    comm_->start({Collective::AllGather, from.data_ptr(), into.data_ptr(), moved.count, moved.dtype,
                  ReduceOp::Sum, 0},
                 options)
        .wait();
  };

  // Every rank's shape: a rank with another number of dimensions is a mismatch Canopy names.
  const std::vector<std::int64_t> shape = shape_of(input);
  at::Tensor mine = at::tensor(shape, at::kLong);
  at::Tensor shapes = at::empty({size_, static_cast<std::int64_t>(shape.size())}, at::kLong);
  gather_now(mine, shapes);
  std::vector<std::int64_t> counts;
  for (int r = 0; r < size_; ++r) {
    at::Tensor theirs = shapes[r];
    const std::vector<std::int64_t> their_shape(theirs.data_ptr<std::int64_t>(),
                                                theirs.data_ptr<std::int64_t>() + theirs.numel());
    if (their_shape[0] != shape[0] || their_shape[1] != shape[1] ||
        !std::equal(shape.begin() + 3, shape.end(), their_shape.begin() + 3))
      fail(ErrorCode::Mismatch,
           "canopy {}: rank {} holds a sparse tensor of sizes [{}] with {} sparse dimensions, rank {} one of "
           "sizes [{}] with {}",
           kSparseCall, rank_, fmt::join(shape.begin() + 3, shape.end(), ", "), shape[0], r,
           fmt::join(their_shape.begin() + 3, their_shape.end(), ", "), their_shape[0]);
    counts.push_back(their_shape[2]);
  }
  const std::int64_t most = *std::max_element(counts.begin(), counts.end());

  // The indices, padded to the largest count: [sparse dims, most] a rank.
  at::Tensor indices = at::zeros({input.sparse_dim(), most}, at::kLong);
  indices.narrow(1, 0, input._nnz()).copy_(input._indices());
  at::Tensor all_indices = at::empty({size_, input.sparse_dim(), most}, at::kLong);
  gather_now(indices, all_indices);

  // The values, padded likewise: [most, dense sizes...] a rank; their gather is the Work.
  std::vector<std::int64_t> value_sizes = input._values().sizes().vec();
  value_sizes[0] = most;
  at::Tensor values = at::zeros(value_sizes, input._values().options());
  values.narrow(0, 0, input._nnz()).copy_(input._values());
  value_sizes.insert(value_sizes.begin(), size_);
  at::Tensor all_values = at::empty(value_sizes, values.options());

  CallRecord record{c10d::OpType::ALLREDUCE, "canopy:all_reduce_sparse", tensors, tensors};
  record.staging = {values, all_values};
  record.copy_out = [tensor, all_indices, all_values, counts, sizes = input.sizes().vec()]() mutable {
    std::vector<at::Tensor> index_parts, value_parts;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      const auto rank = static_cast<std::int64_t>(r);
      index_parts.push_back(all_indices[rank].narrow(1, 0, counts[r]));
      value_parts.push_back(all_values[rank].narrow(0, 0, counts[r]));
    }
    const at::Tensor sum =
        at::sparse_coo_tensor(at::cat(index_parts, 1), at::cat(value_parts, 0), sizes).coalesce();
    tensor.copy_(sum);
  };
  const Elements moved = moved_elements(values);
  return launch(std::move(record),
                {Collective::AllGather, values.data_ptr(), all_values.data_ptr(), moved.count, moved.dtype,
                 ReduceOp::Sum, 0},
                opts.timeout);
}

}  // namespace canopy::pytorch
