// The program a new user writes first, built against the installed package and started by the installed
// canopy-run on 4 ranks: rank 0 sends 1,000 floats to rank 1, then all four all-reduce, then the even and
// odd ranks split and all-reduce in their halves. Proves that headers, libraries, the CMake package and the
// launcher are complete, and that point-to-point leaves the collectives' order alone.
#include <canopy/canopy.hpp>

#include <cstdio>
#include <vector>

int main() {
  canopy::Communicator comm = canopy::Communicator::from_environment();
  if (comm.size() != 4) {
    std::fprintf(stderr, "consumer: expected 4 ranks, got %d\n", comm.size());
    return 1;
  }
  std::vector<float> message(1000, 0.0f);
  if (comm.rank() == 0) {
    for (std::size_t i = 0; i < message.size(); ++i) message[i] = static_cast<float>(i);
    comm.send(std::as_bytes(std::span(message)), 1);
  } else if (comm.rank() == 1) {
    comm.recv(std::as_writable_bytes(std::span(message)), 0);
    if (message[999] != 999.0f) return 2;
  }

  std::vector<float> values{1.0f, static_cast<float>(comm.rank())};
  comm.all_reduce(std::span(values), canopy::ReduceOp::Sum);
  if (values[0] != 4.0f || values[1] != 6.0f) return 3;

  canopy::Communicator half = comm.split(comm.rank() % 2, comm.rank());
  std::vector<float> ranks{static_cast<float>(comm.rank())};
  half.all_reduce(std::span(ranks), canopy::ReduceOp::Sum);
  if (ranks[0] != (comm.rank() % 2 == 0 ? 2.0f : 4.0f)) return 4;

  std::printf("consumer: rank %d of %d, send/recv, all_reduce and split ok\n", comm.rank(), comm.size());
  return 0;
}
