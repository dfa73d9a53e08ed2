// canopy_torch._C: what torch.distributed's creator for backend "canopy" calls (canopy_torch/__init__.py
// registers it), once per process group: init_process_group's, and each new_group's on its members.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>

#include "common/error.hpp"
#include "python/c10d_store.hpp"
#include "python/canopy_c10d_store.hpp"
#include "python/elastic_bindings.hpp"
#include "python/errors.hpp"
#include "python/process_group.hpp"
#include "python/work.hpp"

namespace {

using canopy::pytorch::ProcessGroupCanopy;

// How long interpreter exit waits for the Future callbacks of calls that have already ended.
constexpr canopy::Duration kFinishBeforeExit = std::chrono::seconds(10);

canopy::Duration milliseconds(const std::chrono::duration<float>& timeout) {
  return std::chrono::duration_cast<canopy::Duration>(timeout);
}

c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                            int rank, int size,
                                                            const std::chrono::duration<float>& timeout) {
  // Through Canopy's own store when torch's is one (init_method="etcd://..."), else through torch's.
  std::shared_ptr<canopy::Store> canopy_store = canopy::pytorch::canopy_store_behind(store);
  if (!canopy_store) canopy_store = std::make_shared<canopy::pytorch::C10dStore>(store);
  return c10::make_intrusive<ProcessGroupCanopy>(std::move(canopy_store), rank, size, milliseconds(timeout));
}

c10::intrusive_ptr<c10d::ProcessGroup> create_subgroup(const c10::intrusive_ptr<c10d::ProcessGroup>& parent,
                                                       const std::vector<int>& ranks, const std::string& name,
                                                       const std::chrono::duration<float>& timeout) {
  auto* canopy_parent = dynamic_cast<ProcessGroupCanopy*>(parent.get());
  if (canopy_parent == nullptr)
    canopy::fail(canopy::ErrorCode::InvalidArgument,
                 "canopy new_group: the parent group's backend is {}, not canopy", parent->getBackendName());
  return canopy_parent->create_group(ranks, name, milliseconds(timeout));
}

}  // namespace

PYBIND11_MODULE(_C, module) {
  module.doc() = "Canopy's torch.distributed backend (import canopy_torch, not this module)";
  // Both wait on the other ranks: let other Python threads run meanwhile.
  module.def("create_process_group", &create_process_group, pybind11::arg("store"), pybind11::arg("rank"),
             pybind11::arg("size"), pybind11::arg("timeout"),
             pybind11::call_guard<pybind11::gil_scoped_release>(),
             "Forms a group through `store` (every member calls it); timeout 0 = CANOPY_TIMEOUT.");
  module.def("create_subgroup", &create_subgroup, pybind11::arg("parent"), pybind11::arg("ranks"),
             pybind11::arg("name"), pybind11::arg("timeout"),
             pybind11::call_guard<pybind11::gil_scoped_release>(),
             "The group of `ranks` (ranks of `parent`, a canopy group), formed by its members alone, each "
             "passing the same ranks and name; timeout 0 = the parent's.");
  module.def(
      "etcd_store",
      [](const std::string& address, const std::string& job_token, const std::chrono::duration<float>& timeout) {
        return canopy::pytorch::connect_etcd_for_torch(address, job_token, milliseconds(timeout));
      },
      pybind11::arg("address"), pybind11::arg("job_token"), pybind11::arg("timeout"),
      pybind11::call_guard<pybind11::gil_scoped_release>(),
      "A torch Store on Canopy's etcd store at `address` (etcd://host:port[,host:port...]/PREFIX), for "
      "init_method=\"etcd://...\" (every backend may use it).");
  module.def(
      "_finish_before_exit", [] { canopy::pytorch::Completer::finish_before_interpreter_exit(kFinishBeforeExit); },
      pybind11::call_guard<pybind11::gil_scoped_release>(),
      "Completes the Works of calls that have ended and stops completing any (atexit runs it).");
  pybind11::module_::import("atexit").attr("register")(module.attr("_finish_before_exit"));
  canopy::pytorch::register_error_translation(module);
  canopy::pytorch::add_elastic_functions(module);
}
