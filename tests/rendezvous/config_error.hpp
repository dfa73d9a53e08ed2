// What the launch-environment tests share: the Error(Config) message an environment is refused with.
#pragma once

#include <string>

#include "rendezvous/bootstrap.hpp"
#include "tests/support/config_error.hpp"

namespace canopy::rendezvous {

// The Error(Config) message parsing `env` throws; fails the test if it does not throw one.
inline std::string config_error(const EnvMap& env) {
  return testing::config_error_of([&] { parse_launch_environment(env); });
}

}  // namespace canopy::rendezvous
