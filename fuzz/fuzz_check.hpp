// What every fuzz target shares: a property that does not hold is a crash libFuzzer can save and
// minimise, with the reason printed first (an assert would vanish in a release build).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "canopy/error.hpp"
#include "common/env.hpp"

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

// An environment from fuzzer input: lines "NAME=VALUE" (a line without '=' is skipped).
inline EnvMap environment_from(std::string_view text) {
  EnvMap env;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    std::size_t equals = line.find('=');
    if (equals == std::string_view::npos || equals == 0) continue;
    env[std::string(line.substr(0, equals))] = std::string(line.substr(equals + 1));
  }
  return env;
}

}  // namespace canopy::fuzz
