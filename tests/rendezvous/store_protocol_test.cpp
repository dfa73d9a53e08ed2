// The TcpStore wire format: every request survives a round trip, arrives incomplete at every split
// point, and a lying length field is refused before its bytes arrive.
#include "rendezvous/store_protocol.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace canopy::rendezvous::protocol {
namespace {

using Kind = ParseResult::Kind;

std::vector<Request> every_command() {
  std::vector<Request> all;
  auto make = [&](Command command) -> Request& {
    all.emplace_back();
    all.back().command = command;
    all.back().id = 0xfedc0000u + static_cast<std::uint32_t>(command);
    return all.back();
  };
  auto& set = make(Command::Set);
  set.keys = {"key"};
  set.value = std::string("v\0al", 4);
  auto& get = make(Command::Get);
  get.keys = {"g"};
  get.timeout_ms = 123456789012ull;
  auto& add = make(Command::Add);
  add.keys = {"counter"};
  add.delta = -42;
  auto& cas = make(Command::CompareSet);
  cas.keys = {"c"};
  cas.value = "";
  cas.desired = "new";
  auto& check = make(Command::Check);
  check.keys = {"a", "", "b"};
  auto& wait = make(Command::Wait);
  wait.keys = {"w1", "w2"};
  wait.timeout_ms = 7;
  auto& remove = make(Command::Delete);
  remove.keys = {"gone"};
  make(Command::Ping);
  auto& many = make(Command::GetMany);
  many.keys = {"addr/0", "", "addr/2"};
  many.timeout_ms = 300000;
  return all;
}

TEST(StoreProtocol, EveryRequestRoundTripsAndIsIncompleteAtEverySplit) {
  for (const auto& original : every_command()) {
    std::string bytes = encode_request(original);
    for (std::size_t split = 0; split < bytes.size(); ++split) {
      Request partial;
      EXPECT_EQ(parse_request(std::string_view(bytes).substr(0, split), partial).kind, Kind::Incomplete)
          << to_string(original.command) << " split at " << split;
    }
    Request decoded;
    Request ping;
    ping.command = Command::Ping;
    std::string with_next = bytes + encode_request(ping);  // a following PING must not be consumed
    auto result = parse_request(with_next, decoded);
    ASSERT_EQ(result.kind, Kind::Complete) << to_string(original.command);
    EXPECT_EQ(result.consumed, bytes.size());
    EXPECT_EQ(decoded.id, original.id);
    EXPECT_EQ(decoded.command, original.command);
    EXPECT_EQ(decoded.keys, original.keys);
    EXPECT_EQ(decoded.value, original.value);
    EXPECT_EQ(decoded.desired, original.desired);
    EXPECT_EQ(decoded.delta, original.delta);
    EXPECT_EQ(decoded.timeout_ms, original.timeout_ms);
  }
}

TEST(StoreProtocol, UnknownCommandsAreMalformed) {
  for (int byte : {0, 10, 0x7f, 0xff}) {
    std::string bytes;
    put_u32(bytes, 99);
    put_u8(bytes, static_cast<std::uint8_t>(byte));
    Request request;
    auto result = parse_request(bytes, request);
    EXPECT_EQ(result.kind, Kind::Malformed) << byte;
    EXPECT_NE(result.error.find("unknown command"), std::string::npos);
    EXPECT_EQ(result.id, 99u);  // the ERROR reply can say which request it answers
  }
}

TEST(StoreProtocol, LengthsBeyondTheLimitsAreMalformedFromTheHeaderAlone) {
  std::string key_too_long;
  put_u32(key_too_long, 7);  // request id
  put_u8(key_too_long, static_cast<std::uint8_t>(Command::Get));
  put_u32(key_too_long, static_cast<std::uint32_t>(kMaxKeyBytes + 1));
  std::string value_too_long;
  put_u32(value_too_long, 7);  // request id
  put_u8(value_too_long, static_cast<std::uint8_t>(Command::Set));
  put_bytes(value_too_long, "k");
  put_u32(value_too_long, static_cast<std::uint32_t>(kMaxValueBytes + 1));
  std::string too_many_keys;
  put_u32(too_many_keys, 7);  // request id
  put_u8(too_many_keys, static_cast<std::uint8_t>(Command::Check));
  put_u32(too_many_keys, static_cast<std::uint32_t>(kMaxKeysPerRequest + 1));
  for (const auto& bytes : {key_too_long, value_too_long, too_many_keys}) {
    Request request;
    auto result = parse_request(bytes, request);
    EXPECT_EQ(result.kind, Kind::Malformed);
    EXPECT_NE(result.error.find("limit"), std::string::npos) << result.error;
  }
  // At the limit is fine.
  Request at_limit;
  at_limit.command = Command::Check;
  at_limit.keys.assign(kMaxKeysPerRequest, std::string(kMaxKeyBytes, 'k'));
  Request decoded;
  EXPECT_EQ(parse_request(encode_request(at_limit), decoded).kind, Kind::Complete);
  EXPECT_EQ(decoded.keys.size(), kMaxKeysPerRequest);
}

// GET_MANY carries a job's keys: bounded by their count and by their bytes together, each judged from a
// length field before the bytes it announces.
TEST(StoreProtocol, GetManyIsBoundedByKeysAndTheirBytesTogether) {
  std::string too_many;
  put_u32(too_many, 7);  // request id
  put_u8(too_many, static_cast<std::uint8_t>(Command::GetMany));
  put_u32(too_many, static_cast<std::uint32_t>(kMaxKeysPerGetMany + 1));
  Request request;
  auto result = parse_request(too_many, request);
  EXPECT_EQ(result.kind, Kind::Malformed);
  EXPECT_NE(result.error.find("GET_MANY"), std::string::npos) << result.error;

  // Full-size keys up to the byte limit, then one more length field: refused before its key arrives.
  const std::size_t fit = kMaxGetManyKeyBytes / kMaxKeyBytes;
  std::string too_big;
  put_u32(too_big, 7);  // request id
  put_u8(too_big, static_cast<std::uint8_t>(Command::GetMany));
  put_u32(too_big, static_cast<std::uint32_t>(fit + 1));
  for (std::size_t i = 0; i < fit; ++i) put_bytes(too_big, std::string(kMaxKeyBytes, 'k'));
  EXPECT_EQ(parse_request(too_big, request).kind, Kind::Incomplete);
  put_u32(too_big, 1);
  result = parse_request(too_big, request);
  EXPECT_EQ(result.kind, Kind::Malformed);
  EXPECT_NE(result.error.find("together"), std::string::npos) << result.error;

  // A bootstrap's 16,384 ranks fit in one request, well past CHECK and WAIT's count.
  Request job;
  job.command = Command::GetMany;
  for (int r = 0; r < 16384; ++r) job.keys.push_back("round/0/addr/" + std::to_string(r));
  job.timeout_ms = 1000;
  Request decoded;
  ASSERT_EQ(parse_request(encode_request(job), decoded).kind, Kind::Complete);
  EXPECT_EQ(decoded.keys, job.keys);
}

TEST(StoreProtocol, GetManyRepliesPutTheLengthsBeforeTheValues) {
  std::string bytes = encode_ok_values(41, {"ab", "", "c"});
  std::string expected;
  put_u32(expected, 41);
  put_u8(expected, static_cast<std::uint8_t>(Status::Ok));
  put_u32(expected, 3);
  for (std::uint32_t length : {2u, 0u, 1u}) put_u32(expected, length);
  expected += "abc";
  EXPECT_EQ(bytes, expected);
}

TEST(StoreProtocol, IntegersAreLittleEndian) {
  std::string bytes;
  put_u32(bytes, 0x01020304u);
  put_u16(bytes, 0x0506);
  put_u64(bytes, 0x0708090a0b0c0d0eull);
  EXPECT_EQ(bytes, std::string("\x04\x03\x02\x01\x06\x05\x0e\x0d\x0c\x0b\x0a\x09\x08\x07", 14));
  EXPECT_EQ(get_u32(bytes.data()), 0x01020304u);
  EXPECT_EQ(get_u16(bytes.data() + 4), 0x0506);
  EXPECT_EQ(get_u64(bytes.data() + 6), 0x0708090a0b0c0d0eull);
  std::string hello = encode_hello("tok");
  EXPECT_EQ(hello.substr(0, 8), "CNPYSTOR");
  EXPECT_EQ(hello.size(), kHelloHeaderBytes + 3);
}

TEST(StoreProtocol, AHelloIsIncompleteUntilItsTokenIsHereAndABadMagicIsMalformedAtOnce) {
  const std::string hello = encode_hello("job-token");
  for (std::size_t cut = 0; cut < hello.size(); ++cut)
    EXPECT_EQ(parse_hello(std::string_view(hello).substr(0, cut)).kind, Kind::Incomplete)
        << cut;
  const std::string arrived = hello + "GET";  // a request may follow at once
  const HelloParse whole = parse_hello(arrived);
  ASSERT_EQ(whole.kind, Kind::Complete);
  EXPECT_EQ(whole.consumed, hello.size());
  EXPECT_EQ(whole.version, kVersion);
  EXPECT_EQ(whole.token, "job-token");

  const HelloParse http = parse_hello("GE");  // an HTTP probe's first two bytes
  EXPECT_EQ(http.kind, Kind::Malformed);
  EXPECT_NE(http.error.find("bad magic"), std::string::npos) << http.error;

  std::string oversized(kMagic);
  put_u16(oversized, kVersion);
  put_u32(oversized, static_cast<std::uint32_t>(kMaxTokenBytes + 1));
  const HelloParse too_long = parse_hello(oversized);
  EXPECT_EQ(too_long.kind, Kind::Malformed);
  EXPECT_NE(too_long.error.find("exceeds the limit"), std::string::npos) << too_long.error;
}

}  // namespace
}  // namespace canopy::rendezvous::protocol
