// canopy_torch._C's elastic functions (canopy_torch/elastic.py uses them): the default group formed from the
// launcher's environment on Canopy's own store (a replacement joins instead), and revoke, agree, shrink and
// grow on a canopy process group. Every one that waits on other ranks releases the GIL.
#include "python/elastic_bindings.hpp"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <tuple>

#include "common/error.hpp"
#include "python/errors.hpp"
#include "python/process_group.hpp"

namespace canopy::pytorch {
namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
using Seconds = std::chrono::duration<float>;

ProcessGroupCanopy& canopy_group(const Group& group, const char* call) {
  auto* canopy = dynamic_cast<ProcessGroupCanopy*>(group.get());
  if (canopy == nullptr)
    fail(ErrorCode::InvalidArgument, "canopy_torch.{}: the group's backend is {}, not canopy", call,
         group ? group->getBackendName() : std::string("none"));
  return *canopy;
}

CommunicatorOptions options_with(const Seconds& timeout) {
  CommunicatorOptions options;
  options.timeout = std::chrono::duration_cast<Duration>(timeout);  // 0: CANOPY_TIMEOUT
  return options;
}

// Communicator::from_environment: on canopy-run, the store canopy-run hosts (it outlives any rank); under
// torchrun's variables, a Canopy store on MASTER_PORT hosted by rank 0. With CANOPY_ELASTIC_JOIN=1 (a
// replacement canopy-run --elastic started) it joins the running group when the members grow.
Group group_from_environment(const Seconds& timeout) {
  return c10::make_intrusive<ProcessGroupCanopy>(Communicator::from_environment(options_with(timeout)),
                                                 Duration(0));
}

Group join_group(const Seconds& timeout) {
  const char* join = std::getenv("CANOPY_ELASTIC_JOIN");
  if (join == nullptr || std::string(join) != "1")
    fail(ErrorCode::Config,
         "canopy_torch.join_group: CANOPY_ELASTIC_JOIN is not 1, so this process is no replacement: "
         "canopy-run --elastic starts one with it; the first ranks form the group with group_from_environment");
  return group_from_environment(timeout);
}

std::optional<std::tuple<std::string, std::string>> failure(const Group& group) {
  std::optional<Error> first = canopy_group(group, "failure").failure();
  if (!first) return std::nullopt;
  return std::make_tuple(std::string(code_name(first->code())), std::string(first->what()));
}

}  // namespace

void add_elastic_functions(pybind11::module_& module) {
  using pybind11::arg;
  using Release = pybind11::call_guard<pybind11::gil_scoped_release>;
  module.def("group_from_environment", &group_from_environment, arg("timeout"), Release(),
             "The launcher's group on Canopy's own store (or, with CANOPY_ELASTIC_JOIN=1, the group this "
             "process joins); timeout 0 = CANOPY_TIMEOUT.");
  module.def("join_group", &join_group, arg("timeout"), Release(),
             "On a replacement (CANOPY_ELASTIC_JOIN=1): waits until the running group grows, returns it.");
  module.def(
      "shrink", [](const Group& g) -> Group { return canopy_group(g, "shrink").shrink(); }, arg("group"),
      Release(), "The survivors' group (every survivor calls it); revokes this one.");
  module.def(
      "grow", [](const Group& g) -> Group { return canopy_group(g, "grow").grow(); }, arg("group"), Release(),
      "The members, then the processes waiting in join_group (every member calls it).");
  module.def(
      "revoke", [](const Group& g, const std::string& reason) { canopy_group(g, "revoke").revoke(reason); },
      arg("group"), arg("reason") = "revoked by the user", Release());
  module.def(
      "agree", [](const Group& g, std::uint32_t flags) { return canopy_group(g, "agree").agree(flags); },
      arg("group"), arg("flags"), Release(), "The AND of `flags` over the ranks alive, the same on each.");
  module.def(
      "joiners_waiting", [](const Group& g) { return canopy_group(g, "joiners_waiting").joiners_waiting(); },
      arg("group"), Release());
  module.def(
      "generation", [](const Group& g) { return canopy_group(g, "generation").generation(); }, arg("group"));
  module.def("failure", &failure, arg("group"),
             "(code, message) of the first error that ended the group's communicator, or None.");
}

}  // namespace canopy::pytorch
