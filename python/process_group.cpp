#include "python/process_group.hpp"

#include "common/error.hpp"
#include "python/gil.hpp"
#include "python/tensor_checks.hpp"

namespace canopy::pytorch {
CollectiveOptions call_options(std::chrono::milliseconds timeout, Duration group_timeout) {
  CollectiveOptions options;
  options.timeout = timeout.count() > 0 ? timeout : group_timeout;  // 0: the communicator's
  return options;
}

namespace {

void check_root_tensor(std::int64_t root_tensor, std::string_view call) {
  if (root_tensor != 0)
    fail(ErrorCode::InvalidArgument, "canopy {}: rootTensor {} given; canopy takes one tensor per process",
         call, root_tensor);
}

std::span<std::byte> bytes_of(const at::Tensor& tensor) {
  return {static_cast<std::byte*>(tensor.data_ptr()), static_cast<std::size_t>(tensor.nbytes())};
}

}  // namespace

ProcessGroupCanopy::ProcessGroupCanopy(std::shared_ptr<Store> store, int rank, int size, Duration timeout)
    : c10d::ProcessGroup(rank, size), timeout_(0), completer_(std::make_unique<Completer>()) {
  CommunicatorOptions options;
  options.timeout = timeout;
  comm_ = std::make_unique<Communicator>(std::move(store), rank, size, options);
  init();
}

ProcessGroupCanopy::ProcessGroupCanopy(Communicator comm, Duration timeout)
    : c10d::ProcessGroup(comm.rank(), comm.size()),
      timeout_(timeout),
      completer_(std::make_unique<Completer>()),
      comm_(std::make_unique<Communicator>(std::move(comm))) {
  init();
}

ProcessGroupCanopy::~ProcessGroupCanopy() {
  if (completer_->inherited()) {
    // A forked child's copy of its parent's group: its threads are not here, and its sockets and shared
    // memory are still the parent's. Tearing it down would wait for threads that do not exist and could
    // cut the parent's links, so the child leaves it all to its own exit.
    [[maybe_unused]] Communicator* comm = comm_.release();
    [[maybe_unused]] Completer* completer = completer_.release();
    return;
  }
  without_gil([this] {
    completer_->wait_until_idle();  // the calls in flight end and their Futures' callbacks (Python's too) run
    comm_.reset();
    completer_.reset();
  });
}

c10::intrusive_ptr<ProcessGroupCanopy> ProcessGroupCanopy::shrink() {
  return c10::make_intrusive<ProcessGroupCanopy>(comm_->shrink(), timeout_);
}

c10::intrusive_ptr<ProcessGroupCanopy> ProcessGroupCanopy::grow() {
  return c10::make_intrusive<ProcessGroupCanopy>(comm_->grow(), timeout_);
}

c10::intrusive_ptr<ProcessGroupCanopy> ProcessGroupCanopy::create_group(const std::vector<int>& ranks,
                                                                        const std::string& name,
                                                                        Duration timeout) {
  return c10::make_intrusive<ProcessGroupCanopy>(comm_->create_group(ranks, name),
                                                 timeout.count() > 0 ? timeout : timeout_);
}

template <typename Start>
c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::track(CallRecord record, Start&& start) {
  if (completer_->inherited())
    fail(ErrorCode::InvalidArgument,
         "rank {}: this process group was formed by process {}, and this process ({}) is a child forked from "
         "it, which cannot use it: form a group in the child, or fork before init_process_group",
         rank_, completer_->owner(), ::getpid());
  auto work = c10::make_intrusive<CanopyWork>(rank_, std::move(record));
  canopy::Work call;
  try {
    call = start();
  } catch (...) {
    work->fail_to_start(std::current_exception());
    throw;
  }
  work->attach(call);
  completer_->complete_when_done(work, call);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::launch(CallRecord record, const CollectiveArgs& args,
                                                          std::chrono::milliseconds timeout) {
  return track(std::move(record), [&] { return comm_->start(args, call_options(timeout, timeout_)); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::launch_p2p(CallRecord record, int peer, int tag,
                                                              bool is_send) {
  const char* call = is_send ? "send" : "recv";
  const std::span<std::byte> data = bytes_of(single_tensor(record.inputs, call));
  checked_rank(peer, size_, call, is_send ? "destination" : "source");
  if (tag < 0) fail(ErrorCode::InvalidArgument, "canopy {}: tag {} is negative", call, tag);
  const auto unsigned_tag = static_cast<std::uint32_t>(tag);
  return track(std::move(record), [&] {
    return is_send ? comm_->send_async(data, peer, unsigned_tag)
                   : comm_->recv_async(data, peer, unsigned_tag);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  const at::Tensor& tensor = single_tensor(tensors, "broadcast");
  check_root_tensor(opts.rootTensor, "broadcast");
  const int root = checked_rank(opts.rootRank, size_, "broadcast", "root");
  const Elements moved = moved_elements(tensor);
  void* data = tensor.data_ptr();
  return launch({c10d::OpType::BROADCAST, "canopy:broadcast", tensors, tensors},
                {Collective::Broadcast, data, data, moved.count, moved.dtype, ReduceOp::Sum, root},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].layout() == at::kSparse) return allreduce_sparse(tensors, opts);
  const at::Tensor& tensor = single_tensor(tensors, "all_reduce");
  const DataType dtype = reduction_type(tensor, "all_reduce");
  const ReduceOp op = reduce_op(opts.reduceOp, "all_reduce");
  void* data = tensor.data_ptr();
  return launch({c10d::OpType::ALLREDUCE, "canopy:all_reduce", tensors, tensors},
                {Collective::AllReduce, data, data, static_cast<std::size_t>(tensor.numel()), dtype, op, 0},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  constexpr const char* call = "all_reduce_coalesced";
  if (tensors.empty()) fail(ErrorCode::InvalidArgument, "canopy {}: no tensors given", call);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    check_host_tensor(tensors[i], call, fmt::format("tensor {}", i));
    if (tensors[i].scalar_type() != tensors[0].scalar_type())
      fail(ErrorCode::InvalidArgument,
           "canopy {}: tensor {} is a {}, tensor 0 a {}; coalesced tensors share a dtype", call, i,
           describe(tensors[i]), describe(tensors[0]));
  }
  const DataType dtype = reduction_type(tensors[0], call);
  const ReduceOp op = reduce_op(opts.reduceOp, call);
  std::vector<at::Tensor> flat_parts;
  for (const auto& tensor : tensors) flat_parts.push_back(tensor.view(-1));
  at::Tensor flat = at::cat(flat_parts);  // one call for all: small tensors pay one latency, not one each
  CallRecord record{c10d::OpType::ALLREDUCE_COALESCED, "canopy:all_reduce_coalesced", tensors, tensors};
  record.staging = {flat};
  record.copy_out = [flat, parts = std::move(flat_parts)]() mutable {
    std::int64_t offset = 0;
    for (auto& part : parts) {
      part.copy_(flat.narrow(0, offset, part.numel()));
      offset += part.numel();
    }
  };
  void* data = flat.data_ptr();
  return launch(std::move(record),
                {Collective::AllReduce, data, data, static_cast<std::size_t>(flat.numel()), dtype, op, 0},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  const at::Tensor& tensor = single_tensor(tensors, "reduce");
  check_root_tensor(opts.rootTensor, "reduce");
  const int root = checked_rank(opts.rootRank, size_, "reduce", "root");
  const DataType dtype = reduction_type(tensor, "reduce");
  const ReduceOp op = reduce_op(opts.reduceOp, "reduce");
  void* data = tensor.data_ptr();
  return launch({c10d::OpType::REDUCE, "canopy:reduce", tensors, tensors},
                {Collective::Reduce, data, data, static_cast<std::size_t>(tensor.numel()), dtype, op, root},
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::barrier(const c10d::BarrierOptions& opts) {
  // device_ids name CUDA devices for NCCL; torch already refuses them for other backends.
  return launch({c10d::OpType::BARRIER, "canopy:barrier", {}, {}},
                {Collective::Barrier, nullptr, nullptr, 0, DataType::UInt8, ReduceOp::Sum, 0}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                        int tag) {
  return launch_p2p({c10d::OpType::SEND, "canopy:send", tensors, tensors}, dst_rank, tag, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                        int tag) {
  return launch_p2p({c10d::OpType::RECV, "canopy:recv", tensors, tensors}, src_rank, tag, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCanopy::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  CallRecord record{c10d::OpType::RECVANYSOURCE, "canopy:recv_any_source", tensors, tensors};
  const std::span<std::byte> data = bytes_of(single_tensor(record.inputs, "recv"));
  if (tag < 0) fail(ErrorCode::InvalidArgument, "canopy recv: tag {} is negative", tag);
  record.source = std::make_shared<int>(-1);  // the Work's sourceRank(), once a message is matched
  int& source = *record.source;
  return track(std::move(record),
               [&] { return comm_->recv_any_async(data, source, static_cast<std::uint32_t>(tag)); });
}

void ProcessGroupCanopy::monitoredBarrier(const c10d::BarrierOptions& opts, bool) {
  // Canopy's barrier already names the ranks it waited for when it times out, on every rank (gloo's names
  // them on rank 0 alone, the first one or, with wait_all_ranks, all of them).
  auto work = barrier(opts);
  without_gil([&] { work->wait(); });
}

}  // namespace canopy::pytorch
