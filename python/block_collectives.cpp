// The collectives on one block per rank (gathers, scatters, all-to-all): torch hands them a list of tensors
// or one flat tensor; Canopy works on one flat buffer with the blocks back to back in rank order.
#include <numeric>

#include "common/error.hpp"
#include "python/process_group.hpp"
#include "python/tensor_checks.hpp"

namespace canopy::pytorch {
namespace {

// True when the tensors already lie back to back in one buffer, in list order: no staging copy needed.
bool back_to_back(const std::vector<at::Tensor>& list) {
  for (std::size_t i = 1; i < list.size(); ++i) {
    const auto* previous = static_cast<const std::byte*>(list[i - 1].data_ptr());
    if (!list[i].is_alias_of(list[0]) ||
        static_cast<const std::byte*>(list[i].data_ptr()) != previous + list[i - 1].nbytes())
      return false;
  }
  return true;
}

// One flat tensor over the list's blocks: a view of the list's own memory when its tensors lie back to
// back, else a new tensor (filled from the list when `copy_in`).
struct FlatBlocks {
  at::Tensor flat;
  bool staged = false;
};
FlatBlocks flat_blocks(const std::vector<at::Tensor>& list, const at::TensorOptions& options, bool copy_in) {
  std::int64_t total = 0;
  for (const auto& tensor : list) total += tensor.numel();
  if (!list.empty() && back_to_back(list))
    return {at::from_blob(list[0].data_ptr(), {total}, options), false};
  if (!copy_in) return {at::empty({total}, options), true};
  std::vector<at::Tensor> parts;
  for (const auto& tensor : list) parts.push_back(tensor.view(-1));
  return {parts.empty() ? at::empty({0}, options) : at::cat(parts), true};
}

// After the call: each block of `flat` into its list tensor.
std::function<void()> copy_blocks_out(at::Tensor flat, std::vector<at::Tensor> list) {
  return [flat = std::move(flat), list = std::move(list)]() mutable {
    std::int64_t offset = 0;
    for (auto& tensor : list) {
      tensor.view(-1).copy_(flat.narrow(0, offset, tensor.numel()));
      offset += tensor.numel();
    }
  };
}

void check_same_dtype(const at::Tensor& a, const at::Tensor& b, std::string_view call) {
  if (a.scalar_type() != b.scalar_type())
    fail(ErrorCode::InvalidArgument, "canopy {}: the output is a {}, the input a {}", call, describe(a),
         describe(b));
}

void check_whole(const at::Tensor& whole, const at::Tensor& block, int size, std::string_view call,
                 std::string_view what) {
  if (whole.numel() != block.numel() * size)
    fail(ErrorCode::InvalidArgument, "canopy {}: the {} is a {}; {} ranks x {} elements = {} expected", call,
         what, describe(whole), size, block.numel(), block.numel() * size);
}

// One list argument of torch's list form: the outer list holds exactly one list.
std::vector<at::Tensor>& single_list(std::vector<std::vector<at::Tensor>>& lists, std::string_view call,
                                     std::string_view what) {
  if (lists.size() != 1)
    fail(ErrorCode::InvalidArgument,
         "canopy {}: takes exactly one {} list per process, got {} (the multi-device form is not supported)",
         call, what, lists.size());
  return lists[0];
}

// The per-rank list of a gather's output or a scatter's input: the root's, over one flat buffer; every
// other rank passes none.
struct RootList {
  std::vector<at::Tensor> list;  // empty off the root
  FlatBlocks blocks;
  void* data() const { return list.empty() ? nullptr : blocks.flat.data_ptr(); }
};
RootList root_list(std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& like, bool is_root,
                   int size, std::string_view call, std::string_view what, bool copy_in) {
  if (!is_root) {
    if (!lists.empty() && !lists[0].empty())
      fail(ErrorCode::InvalidArgument, "canopy {}: only the root takes an {} list", call, what);
    return {};
  }
  std::vector<at::Tensor>& list = single_list(lists, call, what);
  check_rank_list(list, static_cast<std::size_t>(size), like, call, what);
  return {list, flat_blocks(list, like.options(), copy_in)};
}

// Elements per rank for all_to_all_single: split sizes count rows (dim 0); none given = equal blocks.
std::vector<std::size_t> split_counts(const at::Tensor& tensor, const std::vector<std::int64_t>& splits,
                                      int size, std::size_t per_item, std::string_view what) {
  const std::int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
  const std::int64_t row = rows == 0 ? 0 : tensor.numel() / rows;
  std::vector<std::size_t> counts(static_cast<std::size_t>(size));
  if (splits.empty()) {
    if (rows % size != 0)
      fail(ErrorCode::InvalidArgument,
           "canopy all_to_all_single: the {} has {} rows, not a multiple of the group's {} ranks; give split "
           "sizes",
           what, rows, size);
    for (auto& count : counts) count = static_cast<std::size_t>(rows / size * row) * per_item;
    return counts;
  }
  if (splits.size() != static_cast<std::size_t>(size))
    fail(ErrorCode::InvalidArgument, "canopy all_to_all_single: {} split sizes has {} entries for {} ranks",
         what, splits.size(), size);
  std::int64_t sum = 0;
  for (std::size_t r = 0; r < splits.size(); ++r) {
    if (splits[r] < 0)
      fail(ErrorCode::InvalidArgument, "canopy all_to_all_single: {} split size {} is negative ({})", what, r,
           splits[r]);
    sum += splits[r];
    counts[r] = static_cast<std::size_t>(splits[r] * row) * per_item;
  }
  if (sum != rows)
    fail(ErrorCode::InvalidArgument,
         "canopy all_to_all_single: {} split sizes add up to {} rows; the {} has {}", what, sum, what, rows);
  return counts;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  constexpr const char* call = "all_gather";
  const at::Tensor& input = single_tensor(inputs, call, "input");
  std::vector<at::Tensor>& list = single_list(outputs, call, "output");
  check_rank_list(list, static_cast<std::size_t>(size_), input, call, "output");
  const Elements moved = moved_elements(input);
  FlatBlocks blocks = flat_blocks(list, input.options(), false);
  CallRecord record{c10d::OpType::ALLGATHER, "canopy:all_gather", inputs, list};
  record.staging = {blocks.flat};
  if (blocks.staged) record.copy_out = copy_blocks_out(blocks.flat, list);
  return launch(std::move(record),
                {Collective::AllGather, input.data_ptr(), blocks.flat.data_ptr(), moved.count, moved.dtype,
                 ReduceOp::Sum, 0},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions& opts) {
  constexpr const char* call = "all_gather_into_tensor";
  check_host_tensor(input, call, "input");
  check_host_tensor(output, call, "output");
  check_same_dtype(output, input, call);
  check_whole(output, input, size_, call, "output");
  const Elements moved = moved_elements(input);
  return launch({c10d::OpType::_ALLGATHER_BASE, "canopy:all_gather_into_tensor", {input}, {output}},
                {Collective::AllGather, input.data_ptr(), output.data_ptr(), moved.count, moved.dtype,
                 ReduceOp::Sum, 0},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* call = "all_gather_coalesced";
  if (inputs.empty()) fail(ErrorCode::InvalidArgument, "canopy {}: no input tensors given", call);
  if (output_lists.size() != static_cast<std::size_t>(size_))
    fail(ErrorCode::InvalidArgument, "canopy {}: {} output lists given; one per rank ({}) expected", call,
         output_lists.size(), size_);
  // Every tensor travels as its bytes, the inputs back to back: one call whatever their dtypes.
  std::vector<at::Tensor> input_bytes;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_host_tensor(inputs[i], call, fmt::format("input {}", i));
    input_bytes.push_back(inputs[i].view(-1).view(at::kByte));
  }
  std::vector<at::Tensor> outputs;  // rank by rank, each rank's in input order: the order of the bytes
  for (std::size_t r = 0; r < output_lists.size(); ++r) {
    if (output_lists[r].size() != inputs.size())
      fail(ErrorCode::InvalidArgument, "canopy {}: output list {} holds {} tensors; {} inputs given", call, r,
           output_lists[r].size(), inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& output = output_lists[r][i];
      check_host_tensor(output, call, fmt::format("output {} of list {}", i, r));
      if (output.scalar_type() != inputs[i].scalar_type() || output.numel() != inputs[i].numel())
        fail(ErrorCode::InvalidArgument, "canopy {}: output {} of list {} is a {}, input {} a {}", call, i, r,
             describe(output), i, describe(inputs[i]));
      outputs.push_back(output);
    }
  }
  at::Tensor flat_input = at::cat(input_bytes);
  at::Tensor flat_output = at::empty({flat_input.numel() * size_}, flat_input.options());
  CallRecord record{c10d::OpType::ALLGATHER_COALESCED, "canopy:all_gather_coalesced", inputs, outputs};
  record.staging = {flat_input, flat_output};
  record.copy_out = [flat_output, outputs]() mutable {
    std::int64_t offset = 0;
    for (auto& output : outputs) {
      const std::int64_t bytes = output.numel() * static_cast<std::int64_t>(output.element_size());
      output.view(-1).view(at::kByte).copy_(flat_output.narrow(0, offset, bytes));
      offset += bytes;
    }
  };
  return launch(std::move(record),
                {Collective::AllGather, flat_input.data_ptr(), flat_output.data_ptr(),
                 static_cast<std::size_t>(flat_input.numel()), DataType::UInt8, ReduceOp::Sum, 0},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  constexpr const char* call = "gather";
  const at::Tensor& input = single_tensor(inputs, call, "input");
  const int root = checked_rank(opts.rootRank, size_, call, "root");
  const RootList outs = root_list(outputs, input, rank_ == root, size_, call, "output", false);
  CallRecord record{c10d::OpType::GATHER, "canopy:gather", inputs, outs.list};
  record.staging = {outs.blocks.flat};
  if (outs.blocks.staged) record.copy_out = copy_blocks_out(outs.blocks.flat, outs.list);
  const Elements moved = moved_elements(input);
  return launch(
      std::move(record),
      {Collective::Gather, input.data_ptr(), outs.data(), moved.count, moved.dtype, ReduceOp::Sum, root},
      opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  constexpr const char* call = "scatter";
  const at::Tensor& output = single_tensor(outputs, call, "output");
  const int root = checked_rank(opts.rootRank, size_, call, "root");
  const RootList ins = root_list(inputs, output, rank_ == root, size_, call, "input", true);
  CallRecord record{c10d::OpType::SCATTER, "canopy:scatter", ins.list, outputs};
  record.staging = {ins.blocks.flat};
  const Elements moved = moved_elements(output);
  return launch(
      std::move(record),
      {Collective::Scatter, ins.data(), output.data_ptr(), moved.count, moved.dtype, ReduceOp::Sum, root},
      opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr const char* call = "reduce_scatter";
  const at::Tensor& output = single_tensor(outputs, call, "output");
  std::vector<at::Tensor>& list = single_list(inputs, call, "input");
  check_rank_list(list, static_cast<std::size_t>(size_), output, call, "input");
  const DataType dtype = reduction_type(output, call);
  const ReduceOp op = reduce_op(opts.reduceOp, call);
  FlatBlocks blocks = flat_blocks(list, output.options(), true);
  CallRecord record{c10d::OpType::REDUCE_SCATTER, "canopy:reduce_scatter", list, outputs};
  record.staging = {blocks.flat};
  return launch(std::move(record),
                {Collective::ReduceScatter, blocks.flat.data_ptr(), output.data_ptr(),
                 static_cast<std::size_t>(output.numel()), dtype, op, 0},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  constexpr const char* call = "reduce_scatter_tensor";
  check_host_tensor(input, call, "input");
  check_host_tensor(output, call, "output");
  check_same_dtype(output, input, call);
  check_whole(input, output, size_, call, "input");
  const DataType dtype = reduction_type(output, call);
  const ReduceOp op = reduce_op(opts.reduceOp, call);
  return launch({c10d::OpType::_REDUCE_SCATTER_BASE, "canopy:reduce_scatter_tensor", {input}, {output}},
                {Collective::ReduceScatter, input.data_ptr(), output.data_ptr(),
                 static_cast<std::size_t>(output.numel()), dtype, op, 0},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<std::int64_t>& output_split_sizes,
    std::vector<std::int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  constexpr const char* call = "all_to_all_single";
  check_host_tensor(input, call, "input");
  check_host_tensor(output, call, "output");
  check_same_dtype(output, input, call);
  const Elements moved = moved_elements(input);
  CallRecord record{c10d::OpType::ALLTOALL_BASE, "canopy:all_to_all_single", {input}, {output}};
  if (output_split_sizes.empty() && input_split_sizes.empty() && output.numel() == input.numel()) {
    if (input.numel() > 0 && (input.dim() == 0 || input.size(0) % size_ != 0))
      fail(ErrorCode::InvalidArgument,
           "canopy {}: the input is a {}: its rows do not split evenly over {} ranks; give split sizes", call,
           describe(input), size_);
    return launch(std::move(record),
                  {Collective::AllToAll, input.data_ptr(), output.data_ptr(), moved.count / size_,
                   moved.dtype, ReduceOp::Sum, 0},
                  opts.timeout);
  }
  record.counts = split_counts(input, input_split_sizes, size_, moved.per_item, "input");
  const auto recv_counts = split_counts(output, output_split_sizes, size_, moved.per_item, "output");
  record.counts.insert(record.counts.end(), recv_counts.begin(), recv_counts.end());
  return launch_all_to_all_v(std::move(record), input.data_ptr(), output.data_ptr(), moved.dtype,
                             opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  constexpr const char* call = "all_to_all";
  if (inputs.size() != static_cast<std::size_t>(size_) || outputs.size() != static_cast<std::size_t>(size_))
    fail(ErrorCode::InvalidArgument, "canopy {}: {} inputs and {} outputs given; the group has {} ranks",
         call, inputs.size(), outputs.size(), size_);
  std::vector<std::size_t> counts;  // send counts, then receive counts
  for (int pass = 0; pass < 2; ++pass) {
    const auto& list = pass == 0 ? inputs : outputs;
    for (std::size_t r = 0; r < list.size(); ++r) {
      check_host_tensor(list[r], call, fmt::format("{} {}", pass == 0 ? "input" : "output", r));
      check_same_dtype(list[r], inputs[0], call);
      counts.push_back(moved_elements(list[r]).count);
    }
  }
  const at::TensorOptions options = inputs[0].options();
  FlatBlocks in = flat_blocks(inputs, options, true);
  FlatBlocks out = flat_blocks(outputs, options, false);
  CallRecord record{c10d::OpType::ALLTOALL, "canopy:all_to_all", inputs, outputs};
  record.staging = {in.flat, out.flat};
  record.counts = std::move(counts);
  if (out.staged) record.copy_out = copy_blocks_out(out.flat, outputs);
  return launch_all_to_all_v(std::move(record), in.flat.data_ptr(), out.flat.data_ptr(),
                             moved_elements(inputs[0]).dtype, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::launch_all_to_all_v(CallRecord record, const void* input,
                                                                       void* output, DataType dtype,
                                                                       std::chrono::milliseconds timeout) {
  CollectiveArgs args{Collective::AllToAllV, input, output, 0, dtype, ReduceOp::Sum, 0};
  args.send_counts = record.counts.data();  // the counts move with the record into the Work, buffer and all
  args.recv_counts = record.counts.data() + size_;
  return launch(std::move(record), args, timeout);
}

}  // namespace canopy::pytorch
