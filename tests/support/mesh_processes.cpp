#include "tests/support/mesh_processes.hpp"

#include <cstdint>
#include <string>

#include "tests/support/store_server_process.hpp"

namespace canopy::testing {

std::vector<RankExit> run_mesh_processes(int size, const MeshConnector& connect, const MeshBody& body,
                                         std::chrono::milliseconds timeout) {
  const std::string token = "mesh-test-token";
  StoreServerProcess server(token);
  const std::uint16_t port = server.port();
  return run_processes(
      size,
      [&](int rank) {
        auto store = connect_tcp_store("127.0.0.1", port, token, std::chrono::seconds(10));
        auto t = connect(*store, rank, size);
        body(*t);
      },
      timeout);
}

}  // namespace canopy::testing
