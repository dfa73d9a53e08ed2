// Averaging on the copy out of a bucket, in every floating-point type, rounded as ReduceOp::Avg rounds.
#include "gradsync/bucket_copy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "canopy/error.hpp"
#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::gradsync {
namespace {

// Divided, not multiplied by a rounded 1/3: 1.0f * (1.0f / 3) and 1.0f / 3 differ in the last bit for
// some values; this is the rounding an all-reduce with ReduceOp::Avg gives.
TEST(CopyAveraged, Float32AndFloat64DivideAsTheAllReduceDoes) {
  std::vector<float> f{3.0f, -6.0f, 1.5f, 0.7f};
  std::vector<float> fo(4), in_place = f;
  copy_averaged(DataType::Float32, fo.data(), f.data(), f.size(), 3);
  collectives::finish_average(DataType::Float32, in_place.data(), in_place.size(), 3);
  EXPECT_EQ(fo, (std::vector<float>{1.0f, -2.0f, 0.5f, 0.7f / 3}));
  EXPECT_EQ(fo, in_place);
  std::vector<double> d{8.0, -2.0}, dout(2);
  copy_averaged(DataType::Float64, dout.data(), d.data(), d.size(), 4);
  EXPECT_EQ(dout, (std::vector<double>{2.0, -0.5}));
}

TEST(CopyAveraged, HalfTypesRoundOnce) {
  using collectives::float_to_bfloat16;
  using collectives::float_to_half;
  std::vector<std::uint16_t> h{float_to_half(6.0f), float_to_half(-1.0f)}, hout(2);
  copy_averaged(DataType::Float16, hout.data(), h.data(), 2, 2);
  EXPECT_EQ(hout, (std::vector<std::uint16_t>{float_to_half(3.0f), float_to_half(-0.5f)}));
  std::vector<std::uint16_t> b{float_to_bfloat16(10.0f)}, bout(1);
  copy_averaged(DataType::BFloat16, bout.data(), b.data(), 1, 2);
  EXPECT_EQ(bout[0], float_to_bfloat16(5.0f));
}

TEST(CopyAveraged, ManyBlocksOneContributionIntegersRefused) {
  std::vector<float> big(100000), out(100000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  copy_averaged(DataType::Float32, out.data(), big.data(), big.size(), 1);
  EXPECT_EQ(out, big);
  copy_averaged(DataType::Float32, out.data(), big.data(), big.size(), 2);
  for (std::size_t i = 0; i < big.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(i) * 0.25f) << i;
  std::int32_t i = 4, o = 0;
  EXPECT_THROW(copy_averaged(DataType::Int32, &o, &i, 1, 2), Error);
  EXPECT_FALSE(is_floating_point(DataType::Int64));
}

}  // namespace
}  // namespace canopy::gradsync
