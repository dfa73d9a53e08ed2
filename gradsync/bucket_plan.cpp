#include "gradsync/bucket_plan.hpp"

#include "common/error.hpp"

namespace canopy::gradsync {

std::vector<std::size_t> reverse_registration_order(std::size_t count) {
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = count - 1 - i;
  return order;
}

std::vector<Bucket> plan_buckets(const std::vector<GradientSlot>& slots,
                                 const std::vector<std::size_t>& order, std::size_t first_bucket_bytes,
                                 std::size_t bucket_bytes, std::size_t in_place_bytes) {
  if (order.size() != slots.size())
    fail(ErrorCode::InvalidArgument, "bucket plan: order names {} gradients, {} are registered", order.size(),
         slots.size());
  std::vector<bool> seen(slots.size(), false);
  std::vector<Bucket> buckets;
  for (std::size_t index : order) {
    if (index >= slots.size() || seen[index])
      fail(ErrorCode::InvalidArgument, "bucket plan: gradient {} is out of range or repeated in the order",
           index);
    seen[index] = true;
    const GradientSlot& slot = slots[index];
    // The bucket being filled is the first one while only one exists.
    std::size_t cap = buckets.size() == 1 ? first_bucket_bytes : bucket_bytes;
    bool in_place = slot.device == Device::CPU && slot.bytes >= in_place_bytes;
    bool fits = !in_place && !buckets.empty() && !buckets.back().in_place &&
                buckets.back().dtype == slot.dtype && buckets.back().device == slot.device &&
                buckets.back().bytes + slot.bytes <= cap;
    if (!fits) {
      Bucket fresh;
      fresh.dtype = slot.dtype;
      fresh.device = slot.device;
      fresh.in_place = in_place;
      buckets.push_back(std::move(fresh));
    }
    Bucket& bucket = buckets.back();
    bucket.gradients.push_back(index);
    bucket.offsets.push_back(bucket.bytes);
    bucket.bytes += slot.bytes;
  }
  return buckets;
}

}  // namespace canopy::gradsync
