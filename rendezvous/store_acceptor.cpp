#include "rendezvous/store_acceptor.hpp"

#include <fmt/format.h>

#include <string>

#include "common/error.hpp"
#include "common/fd_limit.hpp"

namespace canopy::rendezvous {
namespace {

// The kernel cuts it to net.core.somaxconn (4096 on Linux since 5.4): a larger backlog takes effect where
// an administrator raised that for a burst of thousands of connections.
constexpr int kListenBacklog = 65535;

}  // namespace

asio::ip::tcp::acceptor open_store_acceptor(asio::io_context& io, const std::string& host,
                                            std::uint16_t port) {
  using asio::ip::tcp;
  auto try_bind = [&](const tcp::endpoint& endpoint, bool dual_stack, std::error_code& ec) {
    tcp::acceptor acceptor(io);
    acceptor.open(endpoint.protocol(), ec);
    if (ec && ec.category() == std::system_category() && out_of_descriptors(ec.value()))
      fail_descriptor_call("TcpStoreServer: socket() to listen on", ec.value());
    if (ec) return acceptor;
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (dual_stack) acceptor.set_option(asio::ip::v6_only(false), ec);
    ec.clear();
    acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(kListenBacklog, ec);
    return acceptor;
  };
  std::error_code ec;
  if (host.empty()) {
    auto acceptor = try_bind(tcp::endpoint(tcp::v6(), port), true, ec);
    if (!ec) return acceptor;
    if (ec == asio::error::address_in_use)
      fail(ErrorCode::System,
           "TcpStoreServer: port {} is already in use (choose another with CANOPY_MASTER_PORT)", port);
    acceptor = try_bind(tcp::endpoint(tcp::v4(), port), false, ec);
    if (!ec) return acceptor;
    fail(ErrorCode::System, "TcpStoreServer: cannot listen on port {}: {}", port, ec.message());
  }
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec)
    fail(ErrorCode::Config, "TcpStoreServer: cannot resolve the listen address '{}': {}", host, ec.message());
  std::string errors;
  for (const auto& entry : results) {
    auto acceptor = try_bind(entry.endpoint(), false, ec);
    if (!ec) return acceptor;
    errors += fmt::format(" [{}]:{}: {};", entry.endpoint().address().to_string(), port, ec.message());
  }
  fail(ErrorCode::System, "TcpStoreServer: cannot listen on '{}' port {}:{}", host, port, errors);
}

}  // namespace canopy::rendezvous
