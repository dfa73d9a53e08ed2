// The store client's socket: a connection joined to itself is told from a real one.
#include "rendezvous/client_socket.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "canopy/store.hpp"

namespace canopy::rendezvous {
namespace {

// A socket bound to a loopback port and connected to that same port: TCP's simultaneous open joins it
// to itself, as a store client's connect can be joined when its source port is the one it dials.
TEST(ClientSocket, ASocketConnectedToItselfIsToldFromARealConnection) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_TRUE(connected_to_itself(fd));
  ::close(fd);

  TcpStoreServer server("127.0.0.1", 0, "");
  int client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(client, 0);
  address.sin_port = htons(server.port());
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_FALSE(connected_to_itself(client));
  ::close(client);
}

}  // namespace
}  // namespace canopy::rendezvous
