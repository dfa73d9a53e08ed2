#include "canopy/types.hpp"

#include <array>
#include <utility>

namespace canopy {
namespace {

struct DataTypeInfo {
  DataType type;
  std::size_t size;
  std::string_view name;
};
constexpr std::array<DataTypeInfo, 8> kDataTypes{{
    {DataType::Float32, 4, "float32"},
    {DataType::Float64, 8, "float64"},
    {DataType::Float16, 2, "float16"},
    {DataType::BFloat16, 2, "bfloat16"},
    {DataType::Int8, 1, "int8"},
    {DataType::UInt8, 1, "uint8"},
    {DataType::Int32, 4, "int32"},
    {DataType::Int64, 8, "int64"},
}};

// Other spellings users bring from PyTorch, NumPy and nccl-tests.
constexpr std::array<std::pair<std::string_view, DataType>, 12> kDataTypeAliases{{
    {"float", DataType::Float32},  {"f32", DataType::Float32},   {"double", DataType::Float64},
    {"f64", DataType::Float64},    {"half", DataType::Float16},  {"f16", DataType::Float16},
    {"bf16", DataType::BFloat16},  {"char", DataType::Int8},     {"int", DataType::Int32},
    {"uint8_t", DataType::UInt8},  {"long", DataType::Int64},    {"int64_t", DataType::Int64},
}};

constexpr std::array<std::string_view, 5> kOpNames{"sum", "prod", "min", "max", "avg"};
constexpr std::array<std::string_view, 12> kCollectiveNames{
    "send_recv", "broadcast",  "reduce",      "all_reduce", "all_gather", "reduce_scatter",
    "barrier",   "bootstrap",  "all_to_all",  "all_to_all_v", "gather",   "scatter"};

}  // namespace

std::size_t size_of(DataType type) { return kDataTypes[static_cast<std::size_t>(type)].size; }
std::string_view to_string(DataType type) { return kDataTypes[static_cast<std::size_t>(type)].name; }
std::string_view to_string(ReduceOp op) { return kOpNames[static_cast<std::size_t>(op)]; }
std::string_view to_string(Collective collective) {
  return kCollectiveNames[static_cast<std::size_t>(collective)];
}

std::optional<DataType> parse_data_type(std::string_view name) {
  for (const auto& info : kDataTypes)
    if (info.name == name) return info.type;
  for (const auto& [alias, type] : kDataTypeAliases)
    if (alias == name) return type;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  return std::nullopt;
}

}  // namespace canopy
