// libibverbs loads at the first verbs call (transport/verbs/verbs_library.cpp), not with the program.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "common/env.hpp"
#include "tests/support/mapped_libraries.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {
namespace {

TEST(VerbsLibrary, LoadsAtTheFirstVerbsCallAndNotBefore) {
  EXPECT_FALSE(testing::library_is_mapped("libibverbs.so")) << "linked into the program";
  // CANOPY_TRANSPORT=auto asks every rank this; where the kernel has no verbs ABI the answer costs no load.
  const std::string reason = verbs_unavailable_reason(VerbsOptions::from_environment(EnvMap{}));
  if (::access("/sys/class/infiniband_verbs/abi_version", R_OK) != 0) {
    EXPECT_NE(reason.find("no RDMA device"), std::string::npos) << reason;
    EXPECT_FALSE(testing::library_is_mapped("libibverbs.so")) << "loaded to learn there is no device";
  }
  // A call through the library's own function loads it and answers as the library does.
  int count = -1;
  errno = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  EXPECT_TRUE(testing::library_is_mapped("libibverbs.so"));
  if (devices != nullptr) {
    EXPECT_GE(count, 0);
    ibv_free_device_list(devices);
  } else {
    EXPECT_NE(errno, 0);  // ENOSYS where the kernel has no RDMA support
  }
}

}  // namespace
}  // namespace canopy::transport
