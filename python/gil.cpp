#include "python/gil.hpp"

#include <pybind11/pybind11.h>

namespace canopy::pytorch {

void without_gil(const std::function<void()>& f) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    f();
  } else {
    f();
  }
}

}  // namespace canopy::pytorch
