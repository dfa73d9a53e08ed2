// libpmix loads at the first PMIx call (rendezvous/pmix_library.cpp), not with the program.
#include <gtest/gtest.h>
#include <pmix.h>

#include <string>

#include "tests/support/mapped_libraries.hpp"

namespace canopy::rendezvous {
namespace {

TEST(PmixLibrary, LoadsAtTheFirstPmixCallAndNotBefore) {
  EXPECT_FALSE(testing::library_is_mapped("libpmix.so")) << "linked into the program";
  // A call that needs no server: the library's own answer, through the definition that loaded it.
  const std::string name = PMIx_Error_string(PMIX_ERR_TIMEOUT);
  EXPECT_TRUE(testing::library_is_mapped("libpmix.so"));
  EXPECT_NE(name.find("TIMEOUT"), std::string::npos) << name;
}

}  // namespace
}  // namespace canopy::rendezvous
