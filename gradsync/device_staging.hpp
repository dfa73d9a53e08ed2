// CUDA gradients travel through pinned host memory: device -> pinned staging -> all-reduce on the host ->
// device, in chunks, so that the two copies and the network overlap. The synchronizer talks to this
// interface; cuda_staging.cpp implements it when the CUDA toolkit is present, no_cuda_staging.cpp refuses.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "canopy/gradsync.hpp"
#include "common/deadline.hpp"
#include "gradsync/bucket_plan.hpp"

namespace canopy::gradsync {

class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  // On the trainer's thread, when gradient `index` is final on `stream`: remembers that point of the stream
  // (an event), so that the bucket's copy waits for the producer and for nothing else.
  virtual void gradient_ready(std::size_t index, void* stream) = 0;
  // Queues bucket `bucket` (all its gradients ready); buckets must come in plan order.
  virtual void launch(std::size_t bucket) = 0;
  // How many launched buckets are back on the device (GradSyncStats::buckets_done_before_finish).
  virtual std::size_t completed() = 0;
  // Waits until every launched bucket is back on the device; rethrows the first error.
  virtual void wait_all(Deadline deadline) = 0;
  // Broadcasts a device tensor from `root` through a host buffer (broadcast_parameters).
  virtual void broadcast(const TensorView& tensor, int root) = 0;
};

// Pinned staging for two buckets of the largest size, allocated once here. Error(Config) when Canopy was
// built without CUDA; Error(System) when no device can be used.
std::unique_ptr<DeviceStaging> make_cuda_staging(Communicator& comm, const std::vector<TensorView>& gradients,
                                                 const std::vector<Bucket>& buckets,
                                                 const GradSyncOptions& options);

// Number of CUDA devices usable by this process, 0 without CUDA (and the reason in `why`).
int cuda_device_count(std::string* why = nullptr);

}  // namespace canopy::gradsync
