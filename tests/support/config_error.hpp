// The message of the Error(Config) a call throws, for tests of what a bad setting says, and EXPECT_MENTIONS
// to look into it.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "canopy/error.hpp"

namespace canopy::testing {

// Runs `call`; returns the message of the Error(Config) it threw. Fails the test (and returns "") when it
// threw another code or nothing.
template <typename Call>
std::string config_error_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no Error(Config)";
  return "";
}

}  // namespace canopy::testing

// Expects `word` in `text`, printing the whole text when it is missing.
#define EXPECT_MENTIONS(text, word) EXPECT_NE((text).find(word), std::string::npos) << (text)
