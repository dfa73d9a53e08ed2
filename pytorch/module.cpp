// canopy_torch._C: the creator torch.distributed calls for backend "canopy" (registered by
// canopy_torch/__init__.py), once per process group: init_process_group's and each new_group's.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>

#include "pytorch/c10d_store.hpp"
#include "pytorch/process_group.hpp"

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                            int rank, int size,
                                                            const std::chrono::duration<float>& timeout) {
  using namespace canopy::pytorch;
  return c10::make_intrusive<ProcessGroupCanopy>(std::make_shared<C10dStore>(store), rank, size,
                                                 std::chrono::duration_cast<canopy::Duration>(timeout));
}

}  // namespace

PYBIND11_MODULE(_C, module) {
  module.doc() = "Canopy's torch.distributed backend (import canopy_torch, not this module)";
  module.def("create_process_group", &create_process_group, pybind11::arg("store"), pybind11::arg("rank"),
             pybind11::arg("size"), pybind11::arg("timeout"),
             // Forming the group waits on the store for the other ranks: let other Python threads run.
             pybind11::call_guard<pybind11::gil_scoped_release>(),
             "Forms the group through `store` (every member calls it); timeout 0 = CANOPY_TIMEOUT.");
}
