// What the launch-environment tests share: the Error(Config) message an environment is refused with.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "canopy/error.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy::rendezvous {

// The Error(Config) message parsing `env` throws; fails the test if it does not throw one.
inline std::string config_error(const EnvMap& env) {
  try {
    parse_launch_environment(env);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no Error(Config)";
  return "";
}

}  // namespace canopy::rendezvous

#define EXPECT_MENTIONS(text, word) EXPECT_NE((text).find(word), std::string::npos) << (text)
