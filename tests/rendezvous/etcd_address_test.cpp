// etcd:// store addresses: parsed in every build, and where the launch environment takes them.
#include "rendezvous/etcd_address.hpp"

#include <gtest/gtest.h>

#include "rendezvous/base64.hpp"
#include "rendezvous/bootstrap.hpp"
#include "rendezvous/etcd_store.hpp"
#include "tests/rendezvous/config_error.hpp"

namespace canopy::rendezvous {
namespace {

using namespace std::chrono_literals;

TEST(EtcdAddress, MembersPortsAndPrefix) {
  auto address = parse_etcd_address("etcd://h1:2379,h2:12379,h3/canopy/job42/");
  EXPECT_EQ(address.endpoints,
            (std::vector<std::string>{"http://h1:2379", "http://h2:12379", "http://h3:2379"}));
  EXPECT_EQ(address.prefix, "canopy/job42");
  EXPECT_EQ(parse_etcd_address("etcd://[::1]:2380/p").endpoints,
            std::vector<std::string>{"http://[::1]:2380"});
  EXPECT_EQ(parse_etcd_address("etcd://[::1]/p").endpoints, std::vector<std::string>{"http://[::1]:2379"});
  EXPECT_TRUE(is_etcd_address("etcd://h/p"));
  EXPECT_FALSE(is_etcd_address("127.0.0.1"));
}

TEST(EtcdAddress, EveryRefusalNamesTheAddress) {
  for (const char* bad :
       {"etcd://h1:2379", "etcd://h1:2379/", "etcd:///p", "etcd://h1,,h2/p", "etcd://h1,/p", "etcd://h1:0/p",
        "etcd://h1:70000/p", "etcd://h1:x/p", "etcd://[::1/p", "etcd://:2379/p", "http://h/p"}) {
    std::string message = testing::config_error_of([&] { parse_etcd_address(bad); });
    EXPECT_NE(message.find(bad), std::string::npos) << bad << ": " << message;
  }
}

TEST(EtcdAddress, TheLaunchEnvironmentTakesItAsTheStoreAddress) {
  EnvMap env = {
      {"CANOPY_RANK", "1"}, {"CANOPY_WORLD_SIZE", "4"}, {"CANOPY_MASTER_ADDR", "etcd://h1,h2/jobs/7"}};
  LaunchInfo info = parse_launch_environment(env);
  EXPECT_EQ(info.store_etcd, "etcd://h1,h2/jobs/7");
  EXPECT_EQ(info.store_origin, "CANOPY_MASTER_ADDR");
  EXPECT_TRUE(info.store_host.empty());
  // Beside torchrun's agent store no CANOPY_MASTER_PORT is needed: no rank hosts anything.
  EnvMap torchrun = {{"RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "node0"},
                     {"MASTER_PORT", "29500"},
                     {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                     {"CANOPY_MASTER_ADDR", "etcd://h1/jobs/8"}};
  EXPECT_EQ(parse_launch_environment(torchrun).store_etcd, "etcd://h1/jobs/8");
  env["CANOPY_MASTER_ADDR"] = "etcd://h1";  // no prefix: refused before any rank waits on it
  std::string message = testing::config_error_of([&] { parse_launch_environment(env); });
  EXPECT_NE(message.find("prefix"), std::string::npos) << message;
}

// etcd's JSON carries keys and values in base64: every byte, every length's padding, and refusals.
TEST(EtcdAddress, Base64RoundTripsEveryByte) {
  std::string bytes;
  for (int c = 0; c < 256; ++c) bytes.push_back(static_cast<char>(c));
  for (std::size_t n = 0; n <= 7; ++n)
    EXPECT_EQ(base64_decode(base64_encode(bytes.substr(250 - n, n))), bytes.substr(250 - n, n)) << n;
  EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes);
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_decode("Zg=="), "f");
  for (const char* bad : {"Zm9", "Zm9v!", "Z===", "Zg=a", "=Zm9v"}) EXPECT_FALSE(base64_decode(bad)) << bad;
}

// A build without libcurl refuses the address clearly; a build with it connects (etcd_store_test.cpp).
TEST(EtcdAddress, ABuildWithoutTheEtcdStoreSaysSo) {
  if (etcd_built()) GTEST_SKIP() << "this build has the etcd store";
  std::string message = testing::config_error_of([&] { connect_etcd_store("etcd://h1/p", "", 1s); });
  EXPECT_NE(message.find("libcurl"), std::string::npos) << message;
}

}  // namespace
}  // namespace canopy::rendezvous
