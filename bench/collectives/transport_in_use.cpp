#include "bench/collectives/transport_in_use.hpp"

#include <cstdint>
#include <vector>

#include "common/env.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::bench {

std::string TransportInUse::describe() const {
  return requested == name ? name : name + " (" + requested + ")";
}

TransportInUse resolve_transport(transport::TransportKind requested, bool every_rank_has_verbs) {
  switch (requested) {
    case transport::TransportKind::Tcp:
      return {"tcp", "tcp"};
    case transport::TransportKind::Verbs:
      return {"verbs", "verbs"};
    case transport::TransportKind::Auto:
      break;
  }
  return {every_rank_has_verbs ? "verbs" : "tcp", "auto"};
}

TransportInUse transport_in_use(Communicator& comm) {
  const EnvMap env = current_environment();
  const transport::TransportKind requested = transport::transport_kind_from(env);
  if (requested != transport::TransportKind::Auto) return resolve_transport(requested, false);
  const bool here =
      transport::verbs_unavailable_reason(transport::VerbsOptions::from_environment(env)).empty();
  std::vector<std::int64_t> usable{here ? 1 : 0};
  comm.all_reduce(std::span(usable), ReduceOp::Min, {.algorithm = "ring"});
  return resolve_transport(requested, usable[0] == 1);
}

}  // namespace canopy::bench
