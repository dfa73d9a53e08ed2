// CANOPY_IB_HCA: which RDMA devices and ports to use, in the syntax NCCL users already know
// (NCCL_IB_HCA): a comma-separated list of device names, each optionally followed by ":port";
// names are prefixes unless the list starts with "=" (exact names); a leading "^" excludes the listed
// devices instead of selecting them. "" selects every device.
//   "mlx5"          every device whose name starts with mlx5, any port
//   "=mlx5_0:1"     exactly mlx5_0, port 1
//   "^mlx5_1,rxe"   every device except mlx5_1* and rxe*
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace canopy::transport::verbs {

struct HcaSpec {
  struct Entry {
    std::string name;
    int port = 0;  // 0: any port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;

  // Throws Error(Config) naming CANOPY_IB_HCA when an entry is malformed (empty name, bad port).
  static HcaSpec parse(std::string_view text);

  // Whether `port` of device `device` may be used.
  bool matches(std::string_view device, int port) const;
};

}  // namespace canopy::transport::verbs
