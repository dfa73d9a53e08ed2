#include "transport/tcp/interfaces.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "canopy/error.hpp"

namespace canopy::transport {
namespace {

InterfaceAddress make(const std::string& name, const std::string& ip, bool loopback = false) {
  InterfaceAddress i;
  i.name = name;
  i.address = SocketAddress::parse(ip + ":0");
  i.loopback = loopback;
  return i;
}

// A machine with the usual suspects; only the selection logic runs, nothing binds to these.
std::vector<InterfaceAddress> sample() {
  return {make("lo", "127.0.0.1", true), make("docker0", "172.17.0.1"), make("eth0", "10.0.0.2"),
          make("ib0", "192.168.1.2"),    make("lo", "[::1]", true),     make("eth0", "[fd00::2]")};
}

TEST(InterfaceFilter, PrefixesExclusionsAndExactNames) {
  auto prefixes = InterfaceFilter::parse("eth,ib");
  EXPECT_TRUE(prefixes.matches("eth0"));
  EXPECT_TRUE(prefixes.matches("ib1"));
  EXPECT_FALSE(prefixes.matches("lo"));
  auto exclude = InterfaceFilter::parse("^docker,lo");
  EXPECT_FALSE(exclude.matches("docker0"));
  EXPECT_FALSE(exclude.matches("lo"));
  EXPECT_TRUE(exclude.matches("eth0"));
  auto exact = InterfaceFilter::parse("=eth0");
  EXPECT_TRUE(exact.matches("eth0"));
  EXPECT_FALSE(exact.matches("eth01"));
  auto exclude_exact = InterfaceFilter::parse("^=eth0");
  EXPECT_FALSE(exclude_exact.matches("eth0"));
  EXPECT_TRUE(exclude_exact.matches("eth01"));
}

TEST(ChooseInterface, DefaultSkipsLoopbackAndDocker) {
  EXPECT_EQ(choose_interface(sample(), "", "").name, "eth0");
  EXPECT_EQ(choose_interface(sample(), "", "").address.family(), AF_INET);
}

TEST(ChooseInterface, DefaultFallsBackToLoopback) {
  std::vector<InterfaceAddress> only_lo = {make("lo", "127.0.0.1", true), make("docker0", "172.17.0.1")};
  EXPECT_EQ(choose_interface(only_lo, "", "").name, "lo");
}

TEST(ChooseInterface, HonoursTheSpecAndTheFamily) {
  EXPECT_EQ(choose_interface(sample(), "ib", "").name, "ib0");
  EXPECT_EQ(choose_interface(sample(), "^eth,docker", "").name, "lo");
  EXPECT_EQ(choose_interface(sample(), "=lo", "ipv6").address.to_string(), "[::1]:0");
  EXPECT_EQ(choose_interface(sample(), "eth", "AF_INET6").address.to_string(), "[fd00::2]:0");
}

TEST(ChooseInterface, NoMatchIsAConfigErrorListingTheInterfaces) {
  try {
    choose_interface(sample(), "wlan", "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    std::string m = e.what();
    EXPECT_NE(m.find("CANOPY_SOCKET_IFNAME='wlan'"), std::string::npos) << m;
    EXPECT_NE(m.find("eth0 10.0.0.2"), std::string::npos) << m;
  }
  EXPECT_THROW(choose_interface(sample(), "", "ipx"), Error);
}

TEST(ChooseInterface, ThisMachineHasLoopback) {
  auto interfaces = list_interfaces();
  auto lo = choose_interface(interfaces, "=lo", "ipv4");
  EXPECT_TRUE(lo.loopback);
  EXPECT_EQ(lo.address.to_string(), "127.0.0.1:0");
}

TEST(SocketAddress, ParsesAndPrintsBothFamilies) {
  EXPECT_EQ(SocketAddress::parse("127.0.0.1:41235").to_string(), "127.0.0.1:41235");
  EXPECT_EQ(SocketAddress::parse("[::1]:80").to_string(), "[::1]:80");
  EXPECT_THROW(SocketAddress::parse("localhost:80"), Error);
  EXPECT_THROW(SocketAddress::parse("127.0.0.1"), Error);
  EXPECT_THROW(SocketAddress::parse("127.0.0.1:70000"), Error);
}

}  // namespace
}  // namespace canopy::transport
