// The elastic functions of canopy_torch._C (elastic_bindings.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace canopy::pytorch {

void add_elastic_functions(pybind11::module_& module);

}  // namespace canopy::pytorch
