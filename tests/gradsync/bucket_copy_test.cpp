// Averaging on the copy out of a bucket, in every floating-point type.
#include "gradsync/bucket_copy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "canopy/error.hpp"
#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::gradsync {
namespace {

TEST(CopyScaled, Float32AndFloat64) {
  std::vector<float> f{3.0f, -6.0f, 1.5f};
  std::vector<float> fo(3);
  copy_scaled(DataType::Float32, fo.data(), f.data(), f.size(), 1.0 / 3);
  EXPECT_EQ(fo, (std::vector<float>{3.0f * (1.0f / 3), -6.0f * (1.0f / 3), 1.5f * (1.0f / 3)}));
  std::vector<double> d{8.0, -2.0}, dout(2);
  copy_scaled(DataType::Float64, dout.data(), d.data(), d.size(), 0.25);
  EXPECT_EQ(dout, (std::vector<double>{2.0, -0.5}));
}

TEST(CopyScaled, HalfTypesRoundOnce) {
  using collectives::float_to_bfloat16;
  using collectives::float_to_half;
  std::vector<std::uint16_t> h{float_to_half(6.0f), float_to_half(-1.0f)}, hout(2);
  copy_scaled(DataType::Float16, hout.data(), h.data(), 2, 0.5);
  EXPECT_EQ(hout, (std::vector<std::uint16_t>{float_to_half(3.0f), float_to_half(-0.5f)}));
  std::vector<std::uint16_t> b{float_to_bfloat16(10.0f)}, bout(1);
  copy_scaled(DataType::BFloat16, bout.data(), b.data(), 1, 0.5);
  EXPECT_EQ(bout[0], float_to_bfloat16(5.0f));
}

TEST(CopyScaled, ScaleOneIsAPlainCopyAndIntegersAreRefused) {
  std::vector<double> d{1.25, 2.5}, dout(2);
  copy_scaled(DataType::Float64, dout.data(), d.data(), 2, 1.0);
  EXPECT_EQ(dout, d);
  std::int32_t i = 4, o = 0;
  EXPECT_THROW(copy_scaled(DataType::Int32, &o, &i, 1, 0.5), Error);
  EXPECT_FALSE(is_floating_point(DataType::Int64));
}

}  // namespace
}  // namespace canopy::gradsync
