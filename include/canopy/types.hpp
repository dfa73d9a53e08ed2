// The vocabulary every layer shares: element types, reduction operators, collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace canopy {

enum class DataType : std::uint8_t { Float32, Float64, Float16, BFloat16, Int8, UInt8, Int32, Int64 };
enum class ReduceOp : std::uint8_t { Sum, Prod, Min, Max, Avg };
enum class Collective : std::uint8_t {
  PointToPoint,
  Broadcast,
  Reduce,
  AllReduce,
  AllGather,
  ReduceScatter,
  Barrier,
  Bootstrap,  // connection set-up and probes, never a user call
  AllToAll,
  AllToAllV,
  Gather,
  Scatter,
};

inline constexpr DataType kAllDataTypes[] = {DataType::Float32, DataType::Float64, DataType::Float16,
                                             DataType::BFloat16, DataType::Int8,    DataType::UInt8,
                                             DataType::Int32,   DataType::Int64};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                             ReduceOp::Avg};

// Bytes per element.
std::size_t size_of(DataType type);

// Names as users type them: "float32", "bf16", "sum", "all_reduce"...
std::string_view to_string(DataType type);
std::string_view to_string(ReduceOp op);
std::string_view to_string(Collective collective);
std::optional<DataType> parse_data_type(std::string_view name);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

}  // namespace canopy
