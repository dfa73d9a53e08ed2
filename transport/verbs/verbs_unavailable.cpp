// Built instead of the verbs transport when CANOPY_WITH_VERBS is OFF (no libibverbs-dev): the
// selection still compiles, and asking for verbs says why it cannot be had.
#include "common/error.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {
namespace {

constexpr const char* kReason =
    "no RDMA device: this Canopy was built without the verbs transport (CANOPY_WITH_VERBS=OFF: "
    "libibverbs-dev "
    "was not found); use CANOPY_TRANSPORT=tcp";

}  // namespace

VerbsPart connect_verbs_links(Store&, int, int, const VerbsOptions&, std::span<const int>, const AbortFlag&) {
  fail(ErrorCode::Config, "{}", kReason);
}

std::unique_ptr<Transport> connect_verbs_mesh(Store&, int, int, const VerbsOptions&) {
  fail(ErrorCode::Config, "{}", kReason);
}

std::string verbs_unavailable_reason(const VerbsOptions&) {
  return kReason;
}

}  // namespace canopy::transport
