#include "transport/verbs/device.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/verbs/hca_spec.hpp"

namespace canopy::transport::verbs {
namespace {

// What libibverbs reads first to enumerate devices (rdma-core's check_abi_version).
constexpr const char* kVerbsAbiFile = "/sys/class/infiniband_verbs/abi_version";

const char* state_name(ibv_port_state state) {
  return ibv_port_state_str(state);
}

GidType gid_type_of(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V1:
      return GidType::RoCEv1;
    case IBV_GID_TYPE_ROCE_V2:
      return GidType::RoCEv2;
    default:
      return GidType::InfiniBand;
  }
}

// The port's GID table; entries that cannot be read (unused slots answer ENODATA) are left out.
std::vector<GidEntry> read_gid_table(ibv_context* context, int port, int length) {
  std::vector<GidEntry> table;
  for (int index = 0; index < length; ++index) {
    ibv_gid_entry raw{};
    if (ibv_query_gid_ex(context, static_cast<std::uint32_t>(port), static_cast<std::uint32_t>(index), &raw,
                         0) != 0)
      continue;
    GidEntry entry;
    entry.index = index;
    std::memcpy(entry.gid.data(), raw.gid.raw, 16);
    entry.type = gid_type_of(raw.gid_type);
    table.push_back(entry);
  }
  return table;
}

// The GID to use on an ACTIVE port, or why there is none.
std::optional<GidEntry> pick_gid(ibv_context* context, int port, const ibv_port_attr& attributes,
                                 const VerbsOptions& options, std::string& why_not) {
  std::vector<GidEntry> table = read_gid_table(context, port, attributes.gid_tbl_len);
  const bool roce = attributes.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (options.gid_index >= 0) {
    for (const GidEntry& entry : table)
      if (entry.index == options.gid_index) return entry;
    why_not = fmt::format("CANOPY_IB_GID_INDEX={} is not a valid entry of its GID table", options.gid_index);
    return std::nullopt;
  }
  if (auto index = choose_gid(table, roce)) {
    for (const GidEntry& entry : table)
      if (entry.index == *index) return entry;
  }
  why_not = roce ? "no usable RoCE GID (does its netdev have an IP address?)" : "no usable GID";
  return std::nullopt;
}

struct DeviceList {
  ibv_device** devices = nullptr;
  int count = 0;
  ~DeviceList() {
    if (devices != nullptr) ibv_free_device_list(devices);
  }
};

}  // namespace

DevicePort::DevicePort(ibv_context* context, std::string device, int port, const ibv_port_attr& attributes,
                       GidEntry gid)
    : context_(context), device_(std::move(device)), port_(port), attributes_(attributes), gid_(gid) {}

DevicePort::~DevicePort() {
  ibv_close_device(context_);
}

std::string DevicePort::describe() const {
  return fmt::format("{} port {}, {}, GID {}, MTU {}", device_, port_, ethernet() ? "RoCE" : "InfiniBand",
                     verbs::describe(gid_), 128 << attributes_.active_mtu);
}

std::unique_ptr<DevicePort> open_device_port(const VerbsOptions& options) {
  HcaSpec spec = HcaSpec::parse(options.hca);
  // libibverbs answers ENOSYS where the kernel has no verbs ABI to read; asked first, that answer costs no
  // load of the library (verbs_library.cpp), which CANOPY_TRANSPORT=auto would otherwise make every rank pay.
  if (::access(kVerbsAbiFile, R_OK) != 0)
    fail(ErrorCode::Config,
         "no RDMA device: {} is missing, so ibv_get_device_list would fail with ENOSYS (this kernel has no "
         "RDMA support); use CANOPY_TRANSPORT=tcp, or auto to fall back to TCP",
         kVerbsAbiFile);
  DeviceList list;
  errno = 0;
  list.devices = ibv_get_device_list(&list.count);
  if (list.devices == nullptr) {
    int err = errno;
    if (err == ENOSYS)
      fail(ErrorCode::Config,
           "no RDMA device: ibv_get_device_list failed with ENOSYS (this kernel has no RDMA support); "
           "use CANOPY_TRANSPORT=tcp, or auto to fall back to TCP");
    fail(ErrorCode::Config,
         "no RDMA device: ibv_get_device_list failed: {}; use CANOPY_TRANSPORT=tcp, or auto to fall back to "
         "TCP",
         std::strerror(err));
  }
  if (list.count == 0)
    fail(ErrorCode::Config,
         "no RDMA device: ibv_get_device_list found none (is a driver or rdma_rxe loaded?); use "
         "CANOPY_TRANSPORT=tcp, or auto to fall back to TCP");

  std::vector<std::string> passed_over;
  for (int d = 0; d < list.count; ++d) {
    std::string name = ibv_get_device_name(list.devices[d]);
    ibv_context* context = ibv_open_device(list.devices[d]);
    if (context == nullptr) {
      passed_over.push_back(fmt::format("{}: ibv_open_device failed: {}", name, std::strerror(errno)));
      continue;
    }
    ibv_device_attr device_attributes{};
    int ports = ibv_query_device(context, &device_attributes) == 0 ? device_attributes.phys_port_cnt : 0;
    for (int port = 1; port <= ports; ++port) {
      if (!spec.matches(name, port)) {
        passed_over.push_back(
            fmt::format("{} port {}: not selected by CANOPY_IB_HCA='{}'", name, port, options.hca));
        continue;
      }
      ibv_port_attr attributes{};
      if (ibv_query_port(context, static_cast<std::uint8_t>(port), &attributes) != 0) {
        passed_over.push_back(
            fmt::format("{} port {}: ibv_query_port failed: {}", name, port, std::strerror(errno)));
        continue;
      }
      if (attributes.state != IBV_PORT_ACTIVE) {
        passed_over.push_back(
            fmt::format("{} port {}: {}, not ACTIVE", name, port, state_name(attributes.state)));
        continue;
      }
      std::string why_not;
      if (auto gid = pick_gid(context, port, attributes, options, why_not)) {
        auto chosen = std::make_unique<DevicePort>(context, name, port, attributes, *gid);
        log::info("verbs: using {}{}", chosen->describe(),
                  options.gid_index >= 0 ? " (GID from CANOPY_IB_GID_INDEX)" : "");
        return chosen;
      }
      passed_over.push_back(fmt::format("{} port {}: {}", name, port, why_not));
    }
    if (ports == 0) passed_over.push_back(fmt::format("{}: ibv_query_device failed or no ports", name));
    ibv_close_device(context);
  }
  std::string details;
  for (const auto& line : passed_over) details += (details.empty() ? "" : "; ") + line;
  fail(ErrorCode::Config, "no RDMA device with a usable ACTIVE port: {}", details);
}

}  // namespace canopy::transport::verbs
