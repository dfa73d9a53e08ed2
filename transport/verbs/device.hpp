// Finding and opening the RDMA device, port and GID to use: CANOPY_IB_HCA, ACTIVE ports only, the
// GID chosen by choose_gid (or CANOPY_IB_GID_INDEX).
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "transport/verbs/gid_choice.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport::verbs {

// An opened device context with the port and GID chosen on it. Owns the context.
class DevicePort {
 public:
  DevicePort(ibv_context* context, std::string device, int port, const ibv_port_attr& attributes,
             GidEntry gid);
  ~DevicePort();
  DevicePort(const DevicePort&) = delete;
  DevicePort& operator=(const DevicePort&) = delete;

  ibv_context* context() const { return context_; }
  const std::string& device() const { return device_; }
  int port() const { return port_; }
  const ibv_port_attr& attributes() const { return attributes_; }
  bool ethernet() const { return attributes_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  const GidEntry& gid() const { return gid_; }
  // "rxe0 port 1, RoCE, GID ::ffff:192.0.2.1 (RoCE v2, index 1), MTU 1024"
  std::string describe() const;

 private:
  ibv_context* context_;
  std::string device_;
  int port_;
  ibv_port_attr attributes_;
  GidEntry gid_;
};

// Opens the first device and ACTIVE port that options.hca allows. Throws Error(Config) whose message
// starts with "no RDMA device" when the kernel has no RDMA support (ENOSYS), the list is empty, or
// no allowed port is ACTIVE (listing what was found and why it was passed over).
std::unique_ptr<DevicePort> open_device_port(const VerbsOptions& options);

}  // namespace canopy::transport::verbs
