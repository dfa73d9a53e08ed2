// The bucket rules: reverse registration order, a small first bucket, caps, never a split tensor, one
// dtype and device per bucket; and the registration comparison behind broadcast_parameters' error.
#include "gradsync/bucket_plan.hpp"

#include <gtest/gtest.h>

#include "canopy/error.hpp"
#include "gradsync/registration_check.hpp"

namespace canopy::gradsync {
namespace {

constexpr std::size_t kMiB = 1 << 20;

std::vector<GradientSlot> floats(const std::vector<std::size_t>& bytes) {
  std::vector<GradientSlot> slots;
  for (std::size_t b : bytes) slots.push_back({b, DataType::Float32, Device::CPU});
  return slots;
}

std::vector<std::vector<std::size_t>> indices(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<std::size_t>> result;
  for (const Bucket& b : buckets) result.push_back(b.gradients);
  return result;
}

TEST(BucketPlan, ReverseOrderSmallFirstBucketThenCap) {
  // Registered forward: 0..5. Backward produces 5 first, so 5 starts the first (1 MiB) bucket.
  auto slots = floats({10 * kMiB, 10 * kMiB, 10 * kMiB, 2 * kMiB, kMiB / 2, kMiB / 2});
  auto buckets = plan_buckets(slots, reverse_registration_order(slots.size()), kMiB, 25 * kMiB);
  EXPECT_EQ(indices(buckets), (std::vector<std::vector<std::size_t>>{{5, 4}, {3, 2, 1}, {0}}));
  EXPECT_EQ(buckets[0].bytes, kMiB);
  EXPECT_EQ(buckets[1].offsets, (std::vector<std::size_t>{0, 2 * kMiB, 12 * kMiB}));
  EXPECT_EQ(buckets[1].bytes, 22 * kMiB);
}

TEST(BucketPlan, LargeTensorIsNeverSplit) {
  auto slots = floats({100, 40 * kMiB, 100});
  auto buckets = plan_buckets(slots, reverse_registration_order(3), kMiB, 25 * kMiB);
  EXPECT_EQ(indices(buckets), (std::vector<std::vector<std::size_t>>{{2}, {1}, {0}}));
  EXPECT_EQ(buckets[1].bytes, 40 * kMiB);
}

TEST(BucketPlan, DtypeOrDeviceChangeClosesTheBucket) {
  std::vector<GradientSlot> slots{{64, DataType::Float32, Device::CPU},
                                  {64, DataType::Float32, Device::CPU},
                                  {64, DataType::Float16, Device::CPU},
                                  {64, DataType::Float16, Device::CUDA}};
  auto buckets = plan_buckets(slots, {0, 1, 2, 3}, kMiB, kMiB);
  EXPECT_EQ(indices(buckets), (std::vector<std::vector<std::size_t>>{{0, 1}, {2}, {3}}));
  EXPECT_EQ(buckets[1].dtype, DataType::Float16);
  EXPECT_EQ(buckets[2].device, Device::CUDA);
}

TEST(BucketPlan, ConfigurableSizesAndAnyOrder) {
  auto slots = floats({40, 40, 40, 40, 40});
  auto buckets = plan_buckets(slots, {2, 0, 4, 1, 3}, 40, 80);
  EXPECT_EQ(indices(buckets), (std::vector<std::vector<std::size_t>>{{2}, {0, 4}, {1, 3}}));
}

// A host gradient of at least in_place_bytes is a bucket of its own, all-reduced where it lies; the small
// ones around it share buckets as before (never its); device gradients are always staged, never in place.
TEST(BucketPlan, LargeHostGradientsAreAllReducedInPlace) {
  std::vector<GradientSlot> slots{
      {100, DataType::Float32, Device::CPU},  {2 * kMiB, DataType::Float32, Device::CPU},
      {100, DataType::Float32, Device::CPU},  {100, DataType::Float32, Device::CPU},
      {kMiB, DataType::Float32, Device::CPU}, {2 * kMiB, DataType::Float32, Device::CUDA}};
  auto buckets = plan_buckets(slots, {0, 1, 2, 3, 4, 5}, 25 * kMiB, 25 * kMiB, kMiB);
  EXPECT_EQ(indices(buckets), (std::vector<std::vector<std::size_t>>{{0}, {1}, {2, 3}, {4}, {5}}));
  std::vector<bool> in_place;
  for (const Bucket& b : buckets) in_place.push_back(b.in_place);
  EXPECT_EQ(in_place, (std::vector<bool>{false, true, false, true, false}));
  for (const Bucket& b : plan_buckets(slots, {0, 1, 2, 3, 4, 5}, 25 * kMiB, 25 * kMiB))
    EXPECT_FALSE(b.in_place);
}

TEST(BucketPlan, RejectsAnOrderThatIsNotAPermutation) {
  auto slots = floats({4, 4});
  EXPECT_THROW(plan_buckets(slots, {0, 0}, 8, 8), Error);
  EXPECT_THROW(plan_buckets(slots, {0}, 8, 8), Error);
  EXPECT_THROW(plan_buckets(slots, {0, 2}, 8, 8), Error);
}

TEST(RegistrationCheck, FirstDifferenceNamesTheEntry) {
  float a[4], b[4];
  TensorView g4{a, 4, DataType::Float32, Device::CPU}, p4{b, 4, DataType::Float32, Device::CPU};
  TensorView g3{a, 3, DataType::Float32, Device::CPU};
  std::vector<EntryDescription> root{describe_entry("w", g4, p4), describe_entry("b", g4, p4)};
  EXPECT_FALSE(first_difference(root, root).has_value());
  std::vector<EntryDescription> other{describe_entry("w", g4, p4), describe_entry("b", g3, {})};
  EXPECT_EQ(first_difference(root, other), 1u);
  std::vector<EntryDescription> renamed{describe_entry("w", g4, p4), describe_entry("c", g4, p4)};
  EXPECT_EQ(first_difference(root, renamed), 1u);
  std::vector<EntryDescription> shorter{describe_entry("w", g4, p4)};
  EXPECT_EQ(first_difference(root, shorter), 1u);
  EXPECT_NE(entry_text(other[1]).find("3 x float32 on cpu, no parameter"), std::string::npos)
      << entry_text(other[1]);
}

}  // namespace
}  // namespace canopy::gradsync
