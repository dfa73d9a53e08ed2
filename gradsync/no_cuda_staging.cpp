// Built when Canopy has no CUDA toolkit: device gradients are refused with the reason.
#include <string>

#include "common/error.hpp"
#include "gradsync/device_staging.hpp"

namespace canopy::gradsync {

std::unique_ptr<DeviceStaging> make_cuda_staging(Communicator&, const std::vector<TensorView>&,
                                                 const std::vector<Bucket>&, const GradSyncOptions&) {
  fail(ErrorCode::Config,
       "GradientSynchronizer: CUDA gradients were registered but Canopy was built without CUDA "
       "(configure with the CUDA toolkit installed and -DCANOPY_WITH_CUDA=ON)");
}

int cuda_device_count(std::string* why) {
  if (why) *why = "Canopy was built without CUDA (CANOPY_WITH_CUDA=OFF)";
  return 0;
}

}  // namespace canopy::gradsync
