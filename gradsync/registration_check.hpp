// Do all ranks hold the same model? Each registered gradient is described by a few integers that rank 0
// broadcasts; every rank compares them with its own and the first difference becomes the error message.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "canopy/gradsync.hpp"

namespace canopy::gradsync {

// gradient count, dtype, device, parameter count (-1 = none), parameter dtype, hash of the name.
inline constexpr std::size_t kEntryFields = 6;
using EntryDescription = std::array<std::int64_t, kEntryFields>;

EntryDescription describe_entry(const std::string& name, const TensorView& gradient,
                                const TensorView& parameter);

// Index of the first entry that differs (or that one side lacks); nullopt when both lists agree.
std::optional<std::size_t> first_difference(const std::vector<EntryDescription>& a,
                                            const std::vector<EntryDescription>& b);

// "1024 x float32 on cpu, parameter 1024 x float32" for messages.
std::string entry_text(const EntryDescription& entry);

}  // namespace canopy::gradsync
