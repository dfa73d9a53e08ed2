// Where the TcpStore server listens: a bound, listening Asio acceptor, with errors that say what to do.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <string>

namespace canopy::rendezvous {

// Binds where the caller asked: "" means every address, IPv6 and IPv4 on one dual-stack socket, or IPv4
// alone where the host has no IPv6. A port in use, an address that does not resolve or no descriptor left
// is an Error naming it.
asio::ip::tcp::acceptor open_store_acceptor(asio::io_context& io, const std::string& host,
                                            std::uint16_t port);

}  // namespace canopy::rendezvous
