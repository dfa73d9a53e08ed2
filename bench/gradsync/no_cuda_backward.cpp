#include <stdexcept>

#include "bench/gradsync/backward.hpp"

namespace canopy::bench {

std::unique_ptr<Backward> make_cuda_backward(const BackwardSettings&) {
  throw std::runtime_error("--device cuda: this build has no CUDA (configure with -DCANOPY_WITH_CUDA=ON)");
}

}  // namespace canopy::bench
