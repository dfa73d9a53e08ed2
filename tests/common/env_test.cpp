#include <gtest/gtest.h>

#include "canopy/error.hpp"
#include "common/env.hpp"

namespace canopy {
namespace {

TEST(Env, EmptyValuesCountAsUnset) {
  EnvMap env{{"A", ""}, {"B", "x"}};
  EXPECT_FALSE(env_value(env, "A").has_value());
  EXPECT_FALSE(env_value(env, "MISSING").has_value());
  EXPECT_EQ(env_value(env, "B"), "x");
}

TEST(Env, IntegersAreParsedStrictlyAndErrorsNameTheVariable) {
  EnvMap env{{"RANK", "3"}, {"WORLD_SIZE", "4x"}};
  EXPECT_EQ(env_integer(env, "RANK"), 3);
  try {
    env_integer(env, "WORLD_SIZE");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("WORLD_SIZE"), std::string::npos);
  }
}

}  // namespace
}  // namespace canopy
