// Forms a one-rank group through an in-process store server and all-reduces: proves that the
// installed headers, libraries and CMake package are complete.
#include <canopy/canopy.hpp>

#include <cstdio>
#include <vector>

int main() {
  canopy::TcpStoreServer server("127.0.0.1", 0, "consumer-token");
  auto store = canopy::connect_tcp_store("127.0.0.1", server.port(), "consumer-token", std::chrono::seconds(10));
  canopy::CommunicatorOptions options;
  options.job_token = "consumer-token";
  canopy::Communicator comm(store, 0, 1, options);
  std::vector<float> values{1.0f, 2.0f, 3.0f};
  comm.all_reduce(std::span(values), canopy::ReduceOp::Sum);
  if (values[2] != 3.0f) return 1;
  std::printf("consumer: rank %d of %d, all_reduce ok\n", comm.rank(), comm.size());
  return 0;
}
