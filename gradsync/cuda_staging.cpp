// CUDA buckets through pinned host memory. For each bucket, on one staging thread:
//
//   d2h stream:  wait for each gradient's producer event; copy chunk 0, 1, ... into the pinned slot
//   host:        as chunk c lands, start its all-reduce (Avg) on the communicator's progress thread
//   h2d stream:  as chunk c's all-reduce completes, copy it back to the gradients
//
// so device-to-host, network and host-to-device work on different chunks at once; the next bucket's
// device-to-host copies start while this one is on the network. Two pinned slots of the largest bucket
// are allocated once: at most two buckets are in flight, and a slot is refilled only after the
// host-to-device copies out of it have finished (an event orders the two streams).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common/error.hpp"
#include "common/log.hpp"
#include "gradsync/device_staging.hpp"

namespace canopy::gradsync {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    fail(ErrorCode::System, "GradientSynchronizer (CUDA): {} failed: {} ({})", what,
         cudaGetErrorString(status), cudaGetErrorName(status));
}

struct Chunk {
  std::size_t begin = 0, end = 0;  // bytes within the bucket
};

class CudaStaging final : public DeviceStaging {
 public:
  CudaStaging(Communicator& comm, const std::vector<TensorView>& gradients,
              const std::vector<Bucket>& buckets, const GradSyncOptions& options)
      : comm_(comm), gradients_(gradients), buckets_(buckets), collective_(options.collective) {
    std::string why;
    if (cuda_device_count(&why) == 0)
      fail(ErrorCode::System, "GradientSynchronizer: CUDA gradients were registered but {}", why);
    std::size_t largest = 0;
    for (const Bucket& bucket : buckets_) largest = std::max(largest, bucket.bytes);
    std::size_t element = buckets_.empty() ? 1 : size_of(buckets_.front().dtype);
    chunk_bytes_ = std::max(element, options.cuda_chunk_bytes - options.cuda_chunk_bytes % element);
    std::size_t max_chunks = std::max<std::size_t>(1, (largest + chunk_bytes_ - 1) / chunk_bytes_);

    check(cudaStreamCreateWithFlags(&d2h_stream_, cudaStreamNonBlocking),
          "cudaStreamCreate (device to host)");
    check(cudaStreamCreateWithFlags(&h2d_stream_, cudaStreamNonBlocking),
          "cudaStreamCreate (host to device)");
    ready_events_.resize(gradients_.size());
    for (cudaEvent_t& event : ready_events_)
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    for (Slot& slot : slots_) {
      if (largest > 0)
        check(cudaHostAlloc(&slot.host, largest, cudaHostAllocDefault), "cudaHostAlloc (staging)");
      slot.landed.resize(max_chunks);
      // Waited for on the host: blocking, so that the waiting thread sleeps instead of spinning on a core
      // the communicator's progress thread (and the other ranks of the host) need.
      for (cudaEvent_t& event : slot.landed)
        check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync),
              "cudaEventCreate");
      check(cudaEventCreateWithFlags(&slot.drained, cudaEventDisableTiming), "cudaEventCreate");
    }
    check(cudaEventCreateWithFlags(&back_on_device_, cudaEventDisableTiming | cudaEventBlockingSync),
          "cudaEventCreate");
    log::info("GradientSynchronizer (CUDA): 2 pinned slots of {} B, chunks of {} B", largest, chunk_bytes_);
    worker_ = std::thread([this] { run(); });
  }

  ~CudaStaging() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
    cudaStreamSynchronize(d2h_stream_);
    cudaStreamSynchronize(h2d_stream_);
    for (Slot& slot : slots_) {
      if (slot.host) cudaFreeHost(slot.host);
      for (cudaEvent_t event : slot.landed) cudaEventDestroy(event);
      cudaEventDestroy(slot.drained);
    }
    for (cudaEvent_t event : ready_events_) cudaEventDestroy(event);
    cudaEventDestroy(back_on_device_);
    cudaStreamDestroy(d2h_stream_);
    cudaStreamDestroy(h2d_stream_);
  }

  void gradient_ready(std::size_t index, void* stream) override {
    check(cudaEventRecord(ready_events_[index], static_cast<cudaStream_t>(stream)),
          "cudaEventRecord (gradient ready)");
  }

  void launch(std::size_t bucket) override {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(bucket);
      ++launched_;
    }
    changed_.notify_all();
  }

  std::size_t completed() override {
    std::lock_guard lock(mutex_);
    return completed_;
  }

  void wait_all(Deadline deadline) override {
    std::unique_lock lock(mutex_);
    bool done = changed_.wait_until(lock, deadline.at(), [&] { return completed_ == launched_; });
    if (!done)
      fail(ErrorCode::Timeout,
           "GradientSynchronizer (CUDA): {} of {} buckets still in flight at the deadline",
           launched_ - completed_, launched_);
    launched_ = completed_ = 0;
    next_slot_ = 0;
    std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    // Every host-to-device copy is queued by now (the worker is idle): wait for them without spinning.
    check(cudaEventRecord(back_on_device_, h2d_stream_), "cudaEventRecord (back on the device)");
    check(cudaEventSynchronize(back_on_device_), "cudaEventSynchronize (back on the device)");
    if (error) std::rethrow_exception(error);
  }

  void broadcast(const TensorView& tensor, int root) override {
    const std::size_t bytes = tensor.count * size_of(tensor.dtype);
    if (bytes == 0) return;
    auto host = std::make_unique_for_overwrite<std::byte[]>(bytes);
    if (comm_.rank() == root)
      check(cudaMemcpy(host.get(), tensor.data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (broadcast)");
    comm_.run(
        {Collective::Broadcast, host.get(), host.get(), tensor.count, tensor.dtype, ReduceOp::Sum, root},
        collective_);
    if (comm_.rank() != root)
      check(cudaMemcpy(tensor.data, host.get(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy (broadcast)");
  }

 private:
  struct Slot {
    std::byte* host = nullptr;
    std::vector<cudaEvent_t> landed;   // chunk c is in host memory
    cudaEvent_t drained = nullptr;     // the host-to-device copies out of this slot are done
    std::optional<std::size_t> holds;  // the bucket whose device-to-host copies were issued into it
  };

  std::vector<Chunk> chunks_of(const Bucket& bucket) const {
    std::vector<Chunk> chunks;
    for (std::size_t begin = 0; begin < bucket.bytes; begin += chunk_bytes_)
      chunks.push_back({begin, std::min(bucket.bytes, begin + chunk_bytes_)});
    return chunks;
  }

  // Copies [chunk) of the bucket between the gradients and the slot; the pieces of every gradient the
  // chunk overlaps.
  void copy_chunk(const Bucket& bucket, const Chunk& chunk, std::byte* host, bool to_host) {
    for (std::size_t k = 0; k < bucket.gradients.size(); ++k) {
      const TensorView& g = gradients_[bucket.gradients[k]];
      std::size_t begin = bucket.offsets[k], end = begin + g.count * size_of(g.dtype);
      std::size_t lo = std::max(begin, chunk.begin), hi = std::min(end, chunk.end);
      if (lo >= hi) continue;
      auto* device = static_cast<std::byte*>(g.data) + (lo - begin);
      if (to_host)
        check(cudaMemcpyAsync(host + lo, device, hi - lo, cudaMemcpyDeviceToHost, d2h_stream_),
              "cudaMemcpyAsync D2H");
      else
        check(cudaMemcpyAsync(device, host + lo, hi - lo, cudaMemcpyHostToDevice, h2d_stream_),
              "cudaMemcpyAsync H2D");
    }
  }

  void issue_device_to_host(std::size_t b, Slot& slot) {
    const Bucket& bucket = buckets_[b];
    for (std::size_t g : bucket.gradients)
      check(cudaStreamWaitEvent(d2h_stream_, ready_events_[g], 0), "cudaStreamWaitEvent (gradient producer)");
    check(cudaStreamWaitEvent(d2h_stream_, slot.drained, 0), "cudaStreamWaitEvent (slot drained)");
    std::vector<Chunk> chunks = chunks_of(bucket);
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      copy_chunk(bucket, chunks[c], slot.host, true);
      check(cudaEventRecord(slot.landed[c], d2h_stream_), "cudaEventRecord (chunk landed)");
    }
    slot.holds = b;
  }

  void process(std::size_t b) {
    Slot& slot = slots_[next_slot_];
    Slot& other = slots_[1 - next_slot_];
    next_slot_ = 1 - next_slot_;
    if (slot.holds != b) issue_device_to_host(b, slot);
    const Bucket& bucket = buckets_[b];
    std::vector<Chunk> chunks = chunks_of(bucket);
    std::vector<Work> works(chunks.size());
    std::size_t element = size_of(bucket.dtype);
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      check(cudaEventSynchronize(slot.landed[c]), "cudaEventSynchronize (chunk landed)");
      std::byte* at = slot.host + chunks[c].begin;
      works[c] = comm_.start({Collective::AllReduce, at, at, (chunks[c].end - chunks[c].begin) / element,
                              bucket.dtype, ReduceOp::Avg, 0},
                             collective_);
    }
    // While this bucket is on the network, start bringing the next one over (into the other slot).
    std::optional<std::size_t> next;
    {
      std::lock_guard lock(mutex_);
      if (!queue_.empty()) next = queue_.front();
    }
    if (next && other.holds != next) issue_device_to_host(*next, other);
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      works[c].wait();
      copy_chunk(bucket, chunks[c], slot.host, false);
    }
    check(cudaEventRecord(slot.drained, h2d_stream_), "cudaEventRecord (slot drained)");
    slot.holds.reset();
  }

  void run() {
    for (;;) {
      std::size_t b;
      bool failed_before;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        b = queue_.front();
        queue_.pop_front();
        failed_before = error_ != nullptr;
      }
      std::exception_ptr failure;
      try {
        if (!failed_before) process(b);
      } catch (...) {
        failure = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        if (failure && !error_) error_ = failure;
        ++completed_;
      }
      changed_.notify_all();
    }
  }

  Communicator& comm_;
  std::vector<TensorView> gradients_;
  std::vector<Bucket> buckets_;
  CollectiveOptions collective_;
  std::size_t chunk_bytes_ = 0;
  cudaStream_t d2h_stream_ = nullptr;
  cudaStream_t h2d_stream_ = nullptr;
  std::vector<cudaEvent_t> ready_events_;
  cudaEvent_t back_on_device_ = nullptr;  // recorded by wait_all after the last host-to-device copy
  Slot slots_[2];
  std::size_t next_slot_ = 0;  // touched by the worker, and by wait_all once the worker is idle

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::size_t> queue_;
  std::size_t launched_ = 0, completed_ = 0;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<DeviceStaging> make_cuda_staging(Communicator& comm, const std::vector<TensorView>& gradients,
                                                 const std::vector<Bucket>& buckets,
                                                 const GradSyncOptions& options) {
  return std::make_unique<CudaStaging>(comm, gradients, buckets, options);
}

int cuda_device_count(std::string* why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why) *why = fmt::format("no usable CUDA device: cudaGetDeviceCount: {}", cudaGetErrorString(status));
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device: cudaGetDeviceCount returned 0";
  return count;
}

}  // namespace canopy::gradsync
