// Data-parallel gradient synchronisation for trainers that embed Canopy (what DDP's reducer does for
// PyTorch): gradients are registered once, grouped into buckets in reverse registration order (the order
// backward produces them), and each bucket is all-reduced as soon as its last gradient is ready, while
// backward goes on computing earlier layers.
//
//   canopy::TrainingJob job = canopy::join_training_job();      // under canopy-run / torchrun / srun
//   canopy::GradientSynchronizer sync(job.comm);
//   for (auto& layer : model)
//     sync.add(layer.name, canopy::tensor_view(layer.grad), canopy::tensor_view(layer.w));
//   sync.broadcast_parameters();                            // everyone starts from rank 0's weights
//   for (...) {
//     forward(); backward([&](std::size_t i) { sync.mark_ready(i); });   // hook: gradient i is final
//     sync.finish();                                            // gradients now hold the average over ranks
//     optimizer_step();
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "canopy/communicator.hpp"
#include "canopy/store.hpp"
#include "canopy/types.hpp"

namespace canopy {

enum class Device : std::uint8_t { CPU, CUDA };

// A tensor's memory as the synchronizer sees it. CUDA tensors hold device pointers.
struct TensorView {
  void* data = nullptr;
  std::size_t count = 0;  // elements
  DataType dtype = DataType::Float32;
  Device device = Device::CPU;
};

template <typename T>
TensorView tensor_view(std::span<T> data, Device device = Device::CPU) {
  return {data.data(), data.size(), data_type_of<T>(), device};
}

struct GradSyncOptions {
  std::size_t bucket_bytes = std::size_t{25} << 20;       // cap of every bucket but the first
  std::size_t first_bucket_bytes = std::size_t{1} << 20;  // small, so that communication starts early
  // As DDP does: after the first synchronised step, form the buckets again from the order in which the
  // gradients actually became ready (rank 0's order, shared with every rank).
  bool rebuild_buckets = false;
  // Host gradients of at least this size are all-reduced where they lie, each on its own (averaged by the
  // all-reduce itself): no copy into a bucket and back, which on a many-core host took longer than the
  // network. Smaller ones share buckets. SIZE_MAX: every gradient in buckets, as DDP does.
  std::size_t in_place_bytes = std::size_t{1} << 20;
  // CUDA: gradients move device -> pinned host -> network -> device in chunks of this size, pipelined.
  std::size_t cuda_chunk_bytes = std::size_t{4} << 20;
  CollectiveOptions collective;  // algorithm, chunking and deadline of the bucket all-reduces
};

struct GradSyncStats {
  std::uint64_t synced_steps = 0;   // finish() calls that communicated
  std::uint64_t skipped_steps = 0;  // finish() calls in no-sync mode (gradient accumulation)
  std::uint64_t bucket_all_reduces = 0;
  std::uint64_t bytes_all_reduced = 0;
  // How well communication hid behind backward (CPU buckets): the buckets whose all-reduce had already
  // completed when finish() was called, and the time finish() spent waiting for the rest (the
  // communication the trainer saw; the copies back into the gradients are not counted).
  std::uint64_t buckets_done_before_finish = 0;
  double finish_wait_seconds = 0;
};

class GradientSynchronizer {
 public:
  // `comm` must outlive the synchronizer. Every rank of `comm` must build the same synchronizer.
  explicit GradientSynchronizer(Communicator& comm, GradSyncOptions options = {});
  ~GradientSynchronizer();  // waits for outstanding all-reduces; errors are logged, not thrown
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  // Registers a gradient (and optionally its parameter, for broadcast_parameters) in forward order;
  // returns its index for mark_ready. Floating-point types only; all tensors on one device. Registration
  // ends with the first broadcast_parameters(), mark_ready() or buckets() call.
  std::size_t add(std::string name, TensorView gradient, TensorView parameter = {});

  // Collective: checks that every rank registered the same names' shapes, dtypes and devices (else
  // Error(Mismatch) on every rank naming the first difference), then copies rank 0's parameters to all.
  void broadcast_parameters();

  // Gradient accumulation: while sync is off, mark_ready() and finish() do not communicate; the gradients
  // keep accumulating in the trainer's buffers and the next synchronised step all-reduces the sums.
  void set_sync(bool enabled);
  bool sync_enabled() const;

  // Called by the backward hook when gradient `index` is final. Launches every bucket, in bucket order,
  // whose gradients are all ready. From here until finish() returns the gradient is the synchronizer's:
  // do not write or read it (a large one is averaged in place while backward goes on), so the hook must
  // come after the gradient's last accumulation (libtorch: a post-hook on the gradient accumulator).
  // CUDA gradients: `cuda_stream` (a cudaStream_t, null = the legacy default stream) is the stream that
  // produced the gradient; the copy is ordered after it.
  void mark_ready(std::size_t index, void* cuda_stream = nullptr);

  // Waits for every bucket and leaves the average over ranks in every gradient. Error(InvalidArgument)
  // naming the gradients never marked ready; communication errors are rethrown.
  void finish();

  // The buckets as gradient indices, in launch order (forms them if registration is still open).
  std::vector<std::vector<std::size_t>> buckets();
  GradSyncStats stats() const;
  int world_size() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What a training program learns at start: its group, a store for its own coordination (already
// prefixed with the restart round, so keys of a failed attempt never meet the next one's), and which
// attempt this is (canopy-run --max-restarts). Ranks may be numbered differently after a restart.
struct TrainingJob {
  std::unique_ptr<TcpStoreServer> store_server;  // set when this rank hosts the store; destroyed last
  std::shared_ptr<Store> store;
  Communicator comm;
  int restart_count = 0;
};

// Forms the group from the launcher's environment (as Communicator::from_environment does) and keeps
// the store for the program's use (checkpoints, own agreements).
TrainingJob join_training_job(const CommunicatorOptions& options = {});

}  // namespace canopy
