// canopy::Error as Python sees it from canopy_torch's own functions: canopy_torch.CanopyError (a
// RuntimeError) with `.code`, the ErrorCode's name ("PeerFailed"), and the subclasses PeerFailure and
// Revoked, which elastic code branches on. The classes live in canopy_torch/errors.py.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <string_view>

#include "canopy/error.hpp"

namespace canopy::pytorch {

// "PeerFailed", "Revoked", ...: the enumerator's name, as Python code compares it.
std::string_view code_name(ErrorCode code);

// The error as torch's users match it: a timeout reads " Timed out " as gloo's do (torch's own tests match
// " (Timed out|closed|timeout) "), followed by Canopy's message; any other error is returned as it is.
std::exception_ptr torch_facing(std::exception_ptr error);

// Makes every canopy::Error leaving a function of `module` a canopy_torch.CanopyError (or subclass).
void register_error_translation(pybind11::module_& module);

}  // namespace canopy::pytorch
