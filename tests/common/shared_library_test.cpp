#include "common/shared_library.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "canopy/error.hpp"
#include "tests/support/mapped_libraries.hpp"

namespace canopy {
namespace {

std::string load_error(std::vector<std::string> files) {
  try {
    SharedLibrary library(std::move(files), "the frobnicator", "install libfrob1");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    return e.what();
  }
  return "loaded";
}

// A library that is not there: the error says which, why, what needed it and how to get it.
TEST(SharedLibrary, AMissingLibraryIsAClearConfigError) {
  const std::string message = load_error({"/nonexistent/libfrob.so.1", "libfrob.so.1"});
  EXPECT_NE(message.find("the frobnicator needs libfrob.so.1"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/libfrob.so.1"), std::string::npos) << message;  // the loader's reason
  EXPECT_NE(message.find("install libfrob1"), std::string::npos) << message;
}

// The first file that loads is the one used; a function it has works, one it lacks is a clear error.
TEST(SharedLibrary, FindsFunctionsInTheFirstFileThatLoads) {
  ASSERT_FALSE(testing::library_is_mapped("libfrob"));
  const SharedLibrary libm({"/nonexistent/libm.so.6", "libm.so.6"}, "the test", "install libc6");
  EXPECT_EQ(libm.file(), "libm.so.6");
  const auto cosine = reinterpret_cast<double (*)(double)>(libm.symbol("cos"));
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  try {
    libm.symbol("no_such_function_here");
    FAIL() << "no error for a missing function";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("libm.so.6 has no no_such_function_here"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace canopy
