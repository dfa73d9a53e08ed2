#include "transport/frame.hpp"

#include <gtest/gtest.h>

#include "canopy/error.hpp"

namespace canopy::transport {
namespace {

FrameHeader sample_header() {
  FrameHeader h;
  h.envelope.comm_id = 0x0102030405060708ULL;
  h.envelope.seq = 0xFFFFFFFFFFFFFFF0ULL;
  h.envelope.collective = Collective::AllReduce;
  h.envelope.dtype = DataType::BFloat16;
  h.envelope.op = ReduceOp::Max;
  h.envelope.algorithm = 200;
  h.envelope.root = 0xDEADBEEF;
  h.envelope.count = (std::uint64_t{1} << 40) + 3;
  h.envelope.step = 77;
  h.payload_bytes = (std::uint64_t{1} << 41) + 6;
  return h;
}

ErrorCode code_of_decoding(const FrameBytes& bytes, std::string* message = nullptr) {
  try {
    decode_frame(bytes);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "decode_frame accepted a bad header";
  return ErrorCode::InvalidArgument;
}

TEST(Frame, RoundTripKeepsEveryField) {
  FrameHeader h = sample_header();
  FrameBytes bytes = encode_frame(h);
  EXPECT_EQ(decode_frame(bytes), h);
}

TEST(Frame, RoundTripOfEveryEnumValue) {
  for (int c = 0; c <= static_cast<int>(Collective::Scatter); ++c)
    for (DataType t : kAllDataTypes)
      for (ReduceOp op : kAllReduceOps) {
        FrameHeader h;
        h.envelope.collective = static_cast<Collective>(c);
        h.envelope.dtype = t;
        h.envelope.op = op;
        EXPECT_EQ(decode_frame(encode_frame(h)), h);
      }
}

TEST(Frame, IsLittleEndianWithMagicFirst) {
  FrameHeader h;
  h.payload_bytes = 0x0A0B;
  FrameBytes bytes = encode_frame(h);
  EXPECT_EQ(static_cast<char>(bytes[0]), 'C');
  EXPECT_EQ(static_cast<char>(bytes[1]), 'N');
  EXPECT_EQ(static_cast<char>(bytes[2]), 'P');
  EXPECT_EQ(static_cast<char>(bytes[3]), 'Y');
  EXPECT_EQ(bytes[4], std::byte{kFrameVersion});
  EXPECT_EQ(bytes[48], std::byte{0x0B});
  EXPECT_EQ(bytes[49], std::byte{0x0A});
}

TEST(Frame, RejectsBadMagic) {
  FrameBytes bytes = encode_frame(sample_header());
  bytes[1] = std::byte{'X'};
  std::string message;
  EXPECT_EQ(code_of_decoding(bytes, &message), ErrorCode::Protocol);
  EXPECT_NE(message.find("bad magic"), std::string::npos) << message;
}

TEST(Frame, RejectsUnknownVersion) {
  FrameBytes bytes = encode_frame(sample_header());
  bytes[4] = std::byte{kFrameVersion + 1};
  std::string message;
  EXPECT_EQ(code_of_decoding(bytes, &message), ErrorCode::Protocol);
  EXPECT_NE(message.find("version 2"), std::string::npos) << message;
}

TEST(Frame, RejectsUnknownFlags) {
  FrameBytes bytes = encode_frame(sample_header());
  bytes[5] = std::byte{0x80 | kFlagRootInStream};
  std::string message;
  EXPECT_EQ(code_of_decoding(bytes, &message), ErrorCode::Protocol);
  EXPECT_NE(message.find("unknown flags 0x80"), std::string::npos) << message;
}

TEST(Frame, KnownFlagsTravelButAreNeverMatched) {
  FrameHeader h = sample_header();
  h.envelope.flags = kFlagRootInStream;
  const FrameHeader decoded = decode_frame(encode_frame(h));
  EXPECT_EQ(decoded, h);
  EXPECT_EQ(encode_frame(h)[5], std::byte{kFlagRootInStream});
  // What the receiver expects says nothing of flags: the header still matches it.
  EXPECT_NO_THROW(check_frame(decoded, sample_header().envelope, sample_header().payload_bytes, 1, 0));
}

TEST(Frame, RejectsEnumValuesOutOfRange) {
  struct Case {
    std::size_t offset;
    const char* field;
  };
  for (Case c : {Case{6, "collective"}, Case{7, "dtype"}, Case{8, "op"}}) {
    FrameBytes bytes = encode_frame(sample_header());
    bytes[c.offset] = std::byte{0xFF};
    std::string message;
    EXPECT_EQ(code_of_decoding(bytes, &message), ErrorCode::Protocol) << c.field;
    EXPECT_NE(message.find(c.field), std::string::npos) << message;
    EXPECT_NE(message.find("255"), std::string::npos) << message;
  }
  FrameBytes just_past = encode_frame(sample_header());
  just_past[7] = static_cast<std::byte>(static_cast<int>(DataType::Int64) + 1);
  EXPECT_EQ(code_of_decoding(just_past), ErrorCode::Protocol);
}

TEST(Frame, RejectsNonzeroReservedBytes) {
  for (std::size_t offset : {10, 11, 20, 23}) {
    FrameBytes bytes = encode_frame(sample_header());
    bytes[offset] = std::byte{1};
    EXPECT_EQ(code_of_decoding(bytes), ErrorCode::Protocol) << "offset " << offset;
  }
}

TEST(Frame, CheckAcceptsTheExpectedMessage) {
  FrameHeader h = sample_header();
  EXPECT_NO_THROW(check_frame(h, h.envelope, h.payload_bytes, 1, 0));
}

TEST(Frame, CheckNamesBothSidesOfAMismatch) {
  Envelope expected;
  expected.seq = 5;
  expected.collective = Collective::AllReduce;
  expected.dtype = DataType::Float32;
  expected.count = 1000;
  FrameHeader arrived;
  arrived.envelope = expected;
  arrived.envelope.collective = Collective::Broadcast;
  arrived.payload_bytes = 64;
  try {
    check_frame(arrived, expected, 4000, 1, 0);
    FAIL() << "no mismatch reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Mismatch);
    std::string m = e.what();
    EXPECT_NE(m.find("rank 1 expected from rank 0: all_reduce #5 (float32 sum, 1000 elements"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("4000 bytes; rank 0 sent: broadcast #5"), std::string::npos) << m;
    EXPECT_NE(m.find("64 bytes"), std::string::npos) << m;
  }
}

TEST(Frame, CheckCatchesEachFieldAndTheSize) {
  const FrameHeader base = sample_header();
  std::vector<FrameHeader> variants(10, base);
  variants[0].envelope.comm_id ^= 1;
  variants[1].envelope.seq ^= 1;
  variants[2].envelope.collective = Collective::Reduce;
  variants[3].envelope.dtype = DataType::Float64;
  variants[4].envelope.op = ReduceOp::Sum;
  variants[5].envelope.algorithm ^= 1;
  variants[6].envelope.root ^= 1;
  variants[7].envelope.count ^= 1;
  variants[8].envelope.step ^= 1;
  variants[9].payload_bytes = ~std::uint64_t{0};  // the largest size compares without overflow
  for (const FrameHeader& v : variants) {
    EXPECT_THROW(check_frame(v, base.envelope, base.payload_bytes, 3, 2), Error);
    try {
      check_frame(v, base.envelope, base.payload_bytes, 3, 2);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Mismatch);
    }
  }
}

TEST(Frame, MismatchOfCommunicatorShowsTheIds) {
  FrameHeader h = sample_header();
  Envelope expected = h.envelope;
  expected.comm_id = 9;
  try {
    check_frame(h, expected, h.payload_bytes, 1, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("comm 9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace canopy::transport
