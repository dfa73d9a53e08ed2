// How gradients are grouped into buckets: a pure function, so that the rules are tested on their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "canopy/gradsync.hpp"

namespace canopy::gradsync {

struct GradientSlot {
  std::size_t bytes = 0;
  DataType dtype = DataType::Float32;
  Device device = Device::CPU;
};

struct Bucket {
  std::vector<std::size_t> gradients;  // indices, in the order they are laid out in the bucket
  std::vector<std::size_t> offsets;    // byte offset of each gradient in the bucket
  std::size_t bytes = 0;
  DataType dtype = DataType::Float32;
  Device device = Device::CPU;
  bool in_place = false;  // one host gradient, all-reduced where it lies (no copy into a buffer and back)
};

// Fills buckets in `order` (gradient indices, each once): a bucket closes when the next gradient would
// pass its cap (first_bucket_bytes for the first, bucket_bytes after) or has another dtype or device.
// A gradient is never split: one larger than the cap gets a bucket of its own. A host gradient of at least
// `in_place_bytes` gets one too, marked in_place.
std::vector<Bucket> plan_buckets(const std::vector<GradientSlot>& slots,
                                 const std::vector<std::size_t>& order, std::size_t first_bucket_bytes,
                                 std::size_t bucket_bytes, std::size_t in_place_bytes = SIZE_MAX);

// Reverse registration order: backward produces the last layer's gradients first.
std::vector<std::size_t> reverse_registration_order(std::size_t count);

}  // namespace canopy::gradsync
