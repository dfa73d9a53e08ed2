#include "python/errors.hpp"

#include <fmt/format.h>

namespace canopy::pytorch {

std::string_view code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::Config: return "Config";
    case ErrorCode::Timeout: return "Timeout";
    case ErrorCode::PeerFailed: return "PeerFailed";
    case ErrorCode::Mismatch: return "Mismatch";
    case ErrorCode::Protocol: return "Protocol";
    case ErrorCode::Aborted: return "Aborted";
    case ErrorCode::System: return "System";
    case ErrorCode::Resource: return "Resource";
    case ErrorCode::Revoked: return "Revoked";
  }
  return "Unknown";
}

std::exception_ptr torch_facing(std::exception_ptr error) {
  if (!error) return error;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Timeout)
      return std::make_exception_ptr(Error(ErrorCode::Timeout, fmt::format("canopy: Timed out ({})", e.what())));
  } catch (...) {
  }
  return error;
}

void register_error_translation(pybind11::module_&) {
  pybind11::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const Error& e) {
      // canopy_torch/errors.py picks the class from the code; imported here, with the GIL held, because
      // the package imports this module first.
      pybind11::object make = pybind11::module_::import("canopy_torch.errors").attr("from_code");
      pybind11::object raised = make(std::string(code_name(e.code())), std::string(e.what()));
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(raised.ptr())), raised.ptr());
    }
  });
}

}  // namespace canopy::pytorch
