// How two ranks of a host introduce themselves on a pair's Unix socket, whether the pair meets while the
// mesh forms (shm_mesh.hpp) or when a message first needs it (shm_dialer.hpp): the higher rank connects to
// the lower one's listener and says hello (the TCP transport's: magic, version, comm id, rank, size, job
// token) with its doorbell alongside; the lower rank judges it (the token in constant time, the comm, a rank
// it expects, the same user at the other end) and answers with the TCP transport's ack, its own doorbell
// alongside where it accepts. A stranger gets the refusal's status and nothing else.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "transport/shm/shm_options.hpp"
#include "transport/tcp/socket.hpp"

namespace canopy::transport {

// What an introduction leaves for one peer of this host: the pair's Unix socket and the peer's doorbell.
// Both invalid: the peer is not reached through shared memory.
struct ShmPeerLink {
  UniqueFd socket;
  UniqueFd doorbell;
};

// Who introduces itself: this rank of a group of `size`, and the doorbell its peers get.
struct ShmIntroduction {
  int rank = 0;
  int size = 0;
  const ShmOptions* options = nullptr;
  int doorbell = -1;
};

// Connects to the listener `name` and says hello: the socket, or an invalid one where the peer cannot be
// reached (`error` holds the errno: another network namespace, a listener gone). Out of descriptors:
// Error(Resource) naming `need`.
UniqueFd say_shm_hello(const ShmIntroduction& me, const std::string& name, int& error, std::string_view need);

// The peer's answer to this rank's hello, read without waiting.
struct ShmAnswer {
  bool came = false;      // false: nothing there yet
  bool accepted = false;  // with the peer's doorbell
  bool refused = false;   // came, not accepted, and not the socket's end
  UniqueFd doorbell;
  std::string why;  // where it came and was not an acceptance: the refusal's status, or the socket's end
};
ShmAnswer hear_shm_answer(int socket, int peer);

// A hello read on an accepted connection, judged and answered.
struct ShmHello {
  enum class Step { NotYet, Dropped, Refused, Accepted };
  Step step = Step::NotYet;
  int peer = -1;  // Refused: the rank it claimed, where the refusal is about who it is (another user)
  UniqueFd doorbell;
  int answer_error = 0;  // Accepted, but the answer could not be sent (errno): the peer left
};
// Reads the hello on `socket` without waiting; `expected(rank)`: whether that rank may introduce itself.
// Refusals and dropped connections are said at WARN.
ShmHello answer_shm_hello(const ShmIntroduction& me, int socket, const std::function<bool(int)>& expected);

}  // namespace canopy::transport
