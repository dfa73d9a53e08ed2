// What every fuzz target shares: a property that does not hold is a crash libFuzzer can save and
// minimise, with the reason printed first (an assert would vanish in a release build).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "canopy/error.hpp"

namespace canopy::fuzz {

inline void check(bool condition, const char* what, const char* detail = nullptr) {
  if (condition) return;
  std::fprintf(stderr, "fuzz property violated: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  std::abort();
}

// A parser of outside input may refuse it only with the error code its contract names.
inline void check_refusal(const Error& error, ErrorCode allowed, const char* parser) {
  if (error.code() == allowed) return;
  std::fprintf(stderr, "%s refused input with %s, not %s: %s\n", parser,
               std::string(to_string(error.code())).c_str(), std::string(to_string(allowed)).c_str(),
               error.what());
  std::abort();
}

}  // namespace canopy::fuzz
