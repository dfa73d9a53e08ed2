#include "transport/shm/shm_handshake.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/shm/unix_socket.hpp"
#include "transport/tcp/handshake.hpp"

namespace canopy::transport {

UniqueFd say_shm_hello(const ShmIntroduction& me, const std::string& name, int& error,
                       std::string_view need) {
  UniqueFd fd = connect_unix(name, error, need);
  if (!fd.valid()) return fd;
  const Hello hello{.comm_id = me.options->comm_id,
                    .rank = static_cast<std::uint32_t>(me.rank),
                    .size = static_cast<std::uint32_t>(me.size)};
  error = send_packet(fd.get(), encode_hello(hello, me.options->job_token), me.doorbell);
  if (error != 0) return {};
  return fd;
}

ShmAnswer hear_shm_answer(int socket, int peer) {
  std::array<std::byte, kAckSize> packet{};
  ShmAnswer answer;
  const long n = receive_packet(socket, packet, answer.doorbell);
  if (n == -EAGAIN) return answer;
  answer.came = true;
  if (n != static_cast<long>(kAckSize)) {
    answer.why = fmt::format("it closed its socket before it answered ({})",
                             n < 0 ? std::strerror(static_cast<int>(-n)) : "end of stream");
    return answer;
  }
  const Ack ack = decode_ack(packet);
  answer.accepted = ack.status == AckStatus::Accepted && answer.doorbell.valid() &&
                    ack.rank == static_cast<std::uint32_t>(peer);
  answer.refused = !answer.accepted;
  if (answer.refused) answer.why = fmt::format("it refused shared memory ({})", to_string(ack.status));
  return answer;
}

ShmHello answer_shm_hello(const ShmIntroduction& me, int socket, const std::function<bool(int)>& expected) {
  const ShmOptions& options = *me.options;
  std::array<std::byte, kHelloSize + kMaxTokenBytes> packet{};
  ShmHello heard;
  const long n = receive_packet(socket, packet, heard.doorbell);
  if (n == -EAGAIN) return heard;
  Hello hello;
  try {
    if (n < static_cast<long>(kHelloSize)) fail(ErrorCode::Protocol, "a packet of {} bytes", n);
    hello = decode_hello(std::span(packet).first<kHelloSize>());
    if (n != static_cast<long>(kHelloSize + hello.token_bytes))
      fail(ErrorCode::Protocol, "a hello of {} bytes announcing a {}-byte token", n, hello.token_bytes);
  } catch (const Error& e) {
    log::warn("rank {}: dropped a shared-memory connection: {}", me.rank, e.what());
    heard.step = ShmHello::Step::Dropped;
    return heard;
  }
  const std::string_view token(reinterpret_cast<const char*>(&packet[kHelloSize]), hello.token_bytes);
  AckStatus status = AckStatus::Accepted;
  if (!tokens_equal(token, options.job_token))
    status = AckStatus::WrongToken;
  else if (hello.comm_id != options.comm_id)
    status = AckStatus::WrongComm;
  else if (hello.size != static_cast<std::uint32_t>(me.size) || !expected(static_cast<int>(hello.rank)))
    status = AckStatus::BadRank;
  else if (peer_user(socket) != ::getuid())
    status = AckStatus::OtherUser;
  else if (!heard.doorbell.valid())
    status = AckStatus::BadRank;
  const auto ack = encode_ack(
      Ack{.status = status, .comm_id = options.comm_id, .rank = static_cast<std::uint32_t>(me.rank)});
  const int problem = send_packet(socket, ack, status == AckStatus::Accepted ? me.doorbell : -1);
  if (status != AckStatus::Accepted) {
    log::warn("rank {}: refused a shared-memory connection claiming rank {} of comm {}: {}", me.rank,
              hello.rank, hello.comm_id, to_string(status));
    heard.step = ShmHello::Step::Refused;
    heard.peer =
        status == AckStatus::OtherUser ? static_cast<int>(hello.rank) : -1;  // it said it was that rank
    heard.doorbell = UniqueFd();
    return heard;
  }
  heard.step = ShmHello::Step::Accepted;
  heard.peer = static_cast<int>(hello.rank);
  heard.answer_error = problem;
  return heard;
}

}  // namespace canopy::transport
