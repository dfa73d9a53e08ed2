#include <gtest/gtest.h>

#include "canopy/types.hpp"

namespace canopy {
namespace {

TEST(Types, EveryDataTypeRoundTripsThroughItsName) {
  for (DataType type : kAllDataTypes) {
    auto parsed = parse_data_type(to_string(type));
    ASSERT_TRUE(parsed.has_value()) << to_string(type);
    EXPECT_EQ(*parsed, type);
  }
  EXPECT_EQ(parse_data_type("bf16"), DataType::BFloat16);
  EXPECT_EQ(parse_data_type("float"), DataType::Float32);
  EXPECT_FALSE(parse_data_type("float128").has_value());
}

TEST(Types, SizesMatchTheCTypes) {
  EXPECT_EQ(size_of(DataType::Float32), 4u);
  EXPECT_EQ(size_of(DataType::Float64), 8u);
  EXPECT_EQ(size_of(DataType::Float16), 2u);
  EXPECT_EQ(size_of(DataType::BFloat16), 2u);
  EXPECT_EQ(size_of(DataType::Int8), 1u);
  EXPECT_EQ(size_of(DataType::Int64), 8u);
}

TEST(Types, EveryOpRoundTripsThroughItsName) {
  for (ReduceOp op : kAllReduceOps) EXPECT_EQ(parse_reduce_op(to_string(op)), op);
  EXPECT_FALSE(parse_reduce_op("xor").has_value());
}

}  // namespace
}  // namespace canopy
