// The "canopy" backend of torch.distributed (PyTorch 1.13): a c10d::ProcessGroup whose every call is a
// Canopy call on one Communicator: init_process_group's is formed through the c10d Store torch hands the
// creator; each new_group's is created from it by the group's members alone (Communicator::create_group).
//
// Each torch call checks its tensors (tensor_checks.hpp), starts one asynchronous Canopy call on the
// tensors' own memory (list forms go through one flat buffer) and returns a CanopyWork, which the group's
// Completer completes when the call ends. A failed call fails the communicator, as in C++ programs: every
// later call raises naming the first failure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "canopy/communicator.hpp"
#include "python/work.hpp"

namespace canopy::pytorch {

// A call's deadline: its own timeout option if set (torch's kUnsetTimeout is -1), else the group's.
CollectiveOptions call_options(std::chrono::milliseconds timeout, Duration group_timeout);

class ProcessGroupCanopy final : public c10d::ProcessGroup {
 public:
  // `timeout` is every call's deadline (0: CANOPY_TIMEOUT); a call's own timeout option overrides it.
  ProcessGroupCanopy(std::shared_ptr<Store> store, int rank, int size, Duration timeout);
  // A group around a communicator formed already (create_group's).
  ProcessGroupCanopy(Communicator comm, Duration timeout);
  ~ProcessGroupCanopy() override;  // ends the calls in flight and completes their Works, without the GIL

  // The group of `ranks` (ranks of this group, in this order), formed by those ranks alone, each calling
  // this with the same ranks and `name` (torch's group name). `timeout` 0: this group's.
  c10::intrusive_ptr<ProcessGroupCanopy> create_group(const std::vector<int>& ranks, const std::string& name,
                                                      Duration timeout);

  const std::string getBackendName() const override { return "canopy"; }

  // Going on after a failure (canopy_torch.elastic; docs/TORCH.md, *Elastic training*): each is the
  // Communicator call of the same name, on every member; shrink and grow return a new group (with this
  // group's timeout) and leave this one revoked (shrink) or as it was (grow).
  c10::intrusive_ptr<ProcessGroupCanopy> shrink();
  c10::intrusive_ptr<ProcessGroupCanopy> grow();
  void revoke(const std::string& reason) { comm_->revoke(reason); }
  std::uint32_t agree(std::uint32_t flags) { return comm_->agree(flags); }
  std::uint64_t joiners_waiting() const { return comm_->joiners_waiting(); }
  std::uint32_t generation() const { return comm_->generation(); }
  // The error that ended this group's communicator (Communicator::failure); none while healthy.
  std::optional<Error> failure() const { return comm_->failure(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<std::int64_t>& output_split_sizes,
                                               std::vector<std::int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;
  // A barrier that raises naming the ranks that did not reach it within opts.timeout (the group's if
  // unset). torch 1.13's dist.monitored_barrier() serves gloo alone; group.monitored_barrier() reaches this.
  void monitoredBarrier(const c10d::BarrierOptions& opts = {}, bool wait_all_ranks = false) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  // Starts `args` as the next collective and returns its Work.
  c10::intrusive_ptr<c10d::Work> launch(CallRecord record, const CollectiveArgs& args,
                                        std::chrono::milliseconds timeout);
  // all_to_all_v over record.counts: size() send counts, then size() receive counts.
  c10::intrusive_ptr<c10d::Work> launch_all_to_all_v(CallRecord record, const void* input, void* output,
                                                     DataType dtype, std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> launch_p2p(CallRecord record, int peer, int tag, bool is_send);
  // all_reduce of a sparse COO tensor, as gloo does it (sparse_all_reduce.cpp).
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts);
  // The Work of a call just started (or the error that kept it from starting).
  template <typename Start>
  c10::intrusive_ptr<c10d::Work> track(CallRecord record, Start&& start);

  Duration timeout_;                      // each call's deadline; 0: the communicator's own
  std::unique_ptr<Completer> completer_;  // declared first: goes last, after the calls have ended
  std::unique_ptr<Communicator> comm_;
};

}  // namespace canopy::pytorch
