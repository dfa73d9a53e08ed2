#include "transport/tcp/handshake.hpp"

#include <gtest/gtest.h>

#include "canopy/error.hpp"

namespace canopy::transport {
namespace {

std::span<const std::byte, kHelloSize> fixed_part(const std::vector<std::byte>& bytes) {
  return std::span<const std::byte, kHelloSize>(bytes.data(), kHelloSize);
}

TEST(Handshake, HelloRoundTrip) {
  Hello hello{.comm_id = 0xABCDEF0123456789ULL, .rank = 4, .size = 9, .mesh = 1, .token_bytes = 0};
  auto bytes = encode_hello(hello, "secret");
  ASSERT_EQ(bytes.size(), kHelloSize + 6);
  Hello back = decode_hello(fixed_part(bytes));
  EXPECT_EQ(back.comm_id, hello.comm_id);
  EXPECT_EQ(back.rank, 4u);
  EXPECT_EQ(back.size, 9u);
  EXPECT_EQ(back.mesh, 1);
  EXPECT_EQ(back.token_bytes, 6);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data() + kHelloSize), 6), "secret");
}

TEST(Handshake, HelloRejectsGarbageVersionAndHugeTokens) {
  auto bytes = encode_hello(Hello{}, "t");
  auto garbage = bytes;
  garbage[0] = std::byte{'G'};
  EXPECT_THROW(decode_hello(fixed_part(garbage)), Error);
  auto version = bytes;
  version[4] = std::byte{9};
  EXPECT_THROW(decode_hello(fixed_part(version)), Error);
  auto huge = bytes;
  huge[6] = std::byte{0xFF};
  huge[7] = std::byte{0xFF};
  try {
    decode_hello(fixed_part(huge));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Protocol);
  }
  EXPECT_THROW(encode_hello(Hello{}, std::string(kMaxTokenBytes + 1, 'x')), Error);
}

TEST(Handshake, AckRoundTripAndRejections) {
  Ack ack{.status = AckStatus::WrongComm, .comm_id = 17, .rank = 3};
  auto bytes = encode_ack(ack);
  Ack back = decode_ack(bytes);
  EXPECT_EQ(back.status, AckStatus::WrongComm);
  EXPECT_EQ(back.comm_id, 17u);
  EXPECT_EQ(back.rank, 3u);
  auto bad_status = bytes;
  bad_status[5] = std::byte{99};
  EXPECT_THROW(decode_ack(bad_status), Error);
  auto bad_magic = bytes;
  bad_magic[3] = std::byte{0};
  EXPECT_THROW(decode_ack(bad_magic), Error);
}

TEST(Handshake, TokensCompareExactly) {
  EXPECT_TRUE(tokens_equal("", ""));
  EXPECT_TRUE(tokens_equal("abc", "abc"));
  EXPECT_FALSE(tokens_equal("abc", "abd"));
  EXPECT_FALSE(tokens_equal("abc", "abcd"));
}

}  // namespace
}  // namespace canopy::transport
