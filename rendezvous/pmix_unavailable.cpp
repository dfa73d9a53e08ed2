// Built without PMIx (libpmix-dev was not found): ranks spread over hosts by a PMIx launcher must be given
// the store's address.
#include "common/error.hpp"
#include "rendezvous/pmix_exchange.hpp"

namespace canopy::rendezvous {

bool pmix_built() {
  return false;
}

std::string share_from_rank_zero_through_pmix(int, int, const std::string&, Duration) {
  fail(ErrorCode::Config, "PMIx: this build of Canopy has no PMIx support (install libpmix-dev and rebuild)");
}

}  // namespace canopy::rendezvous
