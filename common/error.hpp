// Helpers for raising canopy::Error with a formatted message.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "canopy/error.hpp"

namespace canopy {

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

// Throws Error(System) with `what` and the text of errno.
[[noreturn]] inline void fail_errno(std::string_view what, int err = errno) {
  throw Error(ErrorCode::System, fmt::format("{}: {}", what, std::strerror(err)));
}

}  // namespace canopy
