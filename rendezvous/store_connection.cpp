#include "rendezvous/store_connection.hpp"

#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <utility>

#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/store_wait.hpp"

namespace canopy::rendezvous {
namespace {

namespace proto = protocol;

// However late a request's own deadline, a reply whose first bytes arrived gets this long for the rest,
// and a hello this long when connecting used up the deadline: the server is there.
constexpr Duration kReplyGrace = std::chrono::seconds(5);
// How long a server that closed our hello gets to accept a second connection (a live one does at once).
constexpr Duration kListeningProbe = std::chrono::milliseconds(300);

Deadline later(Deadline a, Deadline b) {
  return a.at() < b.at() ? b : a;
}

}  // namespace

StoreConnection::StoreConnection(const ServerAddress& address, Duration connect_timeout)
    : StoreConnection(address, Deadline::after(clamp_store_wait(connect_timeout))) {}

StoreConnection::StoreConnection(const ServerAddress& address, Deadline deadline)
    : address_(address), socket_(ClientSocket::connect(address.host, address.port, deadline)) {
  hello(address.job_token, deadline.remaining() < kReplyGrace ? Deadline::after(kReplyGrace) : deadline);
  log::debug("connected to the TcpStore at {}", socket_.endpoint());
}

void StoreConnection::hello(const std::string& token, Deadline deadline) {
  socket_.send_all(proto::encode_hello(token), deadline);
  char status = 0;
  try {
    socket_.receive_exact(&status, 1, deadline);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::PeerFailed) throw;
    // Two servers close a hello: one that speaks another protocol, and one whose process is exiting (a
    // killed store). Only the first still accepts and keeps connections: one more tells them apart.
    if (!still_listening())
      fail(ErrorCode::PeerFailed,
           "the TcpStore at {} is unreachable: it closed the connection during the Canopy store hello and "
           "now refuses connections (did its process exit?): {}",
           socket_.endpoint(), e.what());
    fail(ErrorCode::Protocol,
         "the server at {} closed the connection during the Canopy store hello and still accepts "
         "connections: it is not a Canopy TcpStore (a PyTorch TCPStore, e.g. torchrun's agent store, speaks "
         "another protocol: point CANOPY_MASTER_PORT at a free port)",
         socket_.endpoint());
  }
  switch (static_cast<proto::HelloStatus>(status)) {
    case proto::HelloStatus::Ok:
      return;
    case proto::HelloStatus::BadToken:
      fail(ErrorCode::Config,
           "the TcpStore at {} rejected our job token: every rank of a job must have the same "
           "CANOPY_JOB_TOKEN (or the same job id it is derived from); is another job using this port?",
           socket_.endpoint());
    case proto::HelloStatus::BadVersion:
      fail(ErrorCode::Protocol,
           "the TcpStore at {} does not speak store protocol version {}: every rank and the launcher of a "
           "job must run the same Canopy release",
           socket_.endpoint(), proto::kVersion);
  }
  fail(ErrorCode::Protocol, "the TcpStore at {} answered the hello with unknown status {}",
       socket_.endpoint(), static_cast<int>(static_cast<unsigned char>(status)));
}

// Whether the server still accepts a connection and keeps it. A killed store's listener can complete one
// more handshake while its process exits, and then resets it: only a connection that stays open for a
// moment (or is answered) shows a live server that speaks another protocol.
bool StoreConnection::still_listening() const {
  std::optional<ClientSocket> probe;
  try {
    probe.emplace(ClientSocket::connect(address_.host, address_.port, Deadline::after(kListeningProbe)));
  } catch (const Error&) {
    return false;
  }
  try {
    char byte = 0;
    probe->receive_exact(&byte, 1, Deadline::after(kListeningProbe));
    return true;
  } catch (const Error& e) {
    return e.code() == ErrorCode::Timeout;
  }
}

StoreReply StoreConnection::call(proto::Request request, Deadline deadline, const std::string& what) {
  std::unique_lock lock(mutex_);
  if (!broken_.empty())
    fail(ErrorCode::PeerFailed, "{} on the TcpStore at {}: the connection failed earlier ({})", what,
         socket_.endpoint(), broken_);
  while (calls_.count(next_id_)) ++next_id_;  // after 2^32 requests an id may still be waiting
  request.id = next_id_++;
  const std::uint32_t id = request.id;
  Call& call = calls_[id];
  call.command = request.command;
  call.keys = request.keys.size();
  call.deadline = deadline;
  call.sent = Clock::now();
  lock.unlock();

  std::string bytes = proto::encode_request(request);
  try {
    std::lock_guard write(write_mutex_);
    socket_.send_all(bytes, deadline);
  } catch (const Error& e) {
    // Part of the request may be on the wire: nothing after it could be told apart.
    lock.lock();
    calls_.erase(id);
    break_connection(e.code(), e.what());
    fail(e.code(), "{}: {}", what, e.what());
  }

  lock.lock();
  for (;;) {
    if (call.done) {
      Call answered = std::move(call);
      calls_.erase(id);
      lock.unlock();
      switch (answered.status) {
        case proto::Status::Ok:
          return std::move(answered.reply);
        case proto::Status::Timeout:
          fail(ErrorCode::Timeout, "{} on the TcpStore at {} timed out: {}", what, socket_.endpoint(),
               answered.message);
        case proto::Status::Error:
          fail(ErrorCode::InvalidArgument, "{} on the TcpStore at {} failed: {}", what, socket_.endpoint(),
               answered.message);
      }
      fail(ErrorCode::Protocol, "{}: the TcpStore at {} answered with unknown status {}", what,
           socket_.endpoint(), static_cast<int>(answered.status));
    }
    if (!broken_.empty()) {
      if (call.being_read) {
        call.abandoned = true;  // the reader still writes into it, and drops it after
      } else {
        calls_.erase(id);
      }
      fail(broken_code_, "{}: {}", what, broken_);
    }
    if (deadline.expired()) {
      call.abandoned = true;
      const std::string why = fmt::format(
          "no answer from the TcpStore at {} before the deadline (its own wait and {} s more): is the server "
          "process alive and not stopped?",
          socket_.endpoint(), std::chrono::duration_cast<std::chrono::seconds>(kReplyGrace).count());
      // Silence since this request went out, for all of its deadline: the server is not answering anyone,
      // so every other caller learns it now rather than at its own deadline. Not where a reply waits
      // unread (this process, not the server, was stalled).
      if (last_heard_ <= call.sent && !reply_waiting())
        break_connection(ErrorCode::Timeout,
                         fmt::format("{} (nothing came from it for {:.1f} s, since {} was sent)", why,
                                     std::chrono::duration<double>(Clock::now() - call.sent).count(), what));
      fail(ErrorCode::Timeout, "{}: {}", what, why);
    }
    if (!reading_) {
      reading_ = true;
      lock.unlock();
      read_one(deadline);
      lock.lock();
      reading_ = false;
      changed_.notify_all();  // a reply for another caller, or the read role for whoever wants it
      continue;
    }
    changed_.wait_until(lock, deadline.at());
  }
}

bool StoreConnection::reply_waiting() {
  try {
    return socket_.wait_readable(Deadline::after(Duration::zero()));
  } catch (const Error&) {
    return false;
  }
}

void StoreConnection::read_one(Deadline deadline) {
  Call* call = nullptr;
  std::uint32_t id = 0;
  try {
    if (!socket_.wait_readable(deadline)) return;
    char head[proto::kReplyHeaderBytes];
    socket_.receive_exact(head, sizeof(head), Deadline::after(kReplyGrace));
    id = proto::get_u32(head);
    const auto status = static_cast<proto::Status>(static_cast<unsigned char>(head[4]));
    {
      std::lock_guard lock(mutex_);
      auto it = calls_.find(id);
      if (it == calls_.end())
        fail(ErrorCode::Protocol, "the TcpStore at {} answered request {}, which is not waiting",
             socket_.endpoint(), id);
      call = &it->second;
      call->being_read = true;  // its caller leaves it to us from now on
      last_heard_ = Clock::now();
    }
    call->status = status;
    read_body(*call, later(call->deadline, Deadline::after(kReplyGrace)));
    std::lock_guard lock(mutex_);
    call->being_read = false;
    if (call->abandoned) {
      calls_.erase(id);
    } else {
      call->done = true;
    }
  } catch (const Error& e) {
    std::lock_guard lock(mutex_);
    break_connection(e.code() == ErrorCode::Protocol ? ErrorCode::Protocol : ErrorCode::PeerFailed, e.what());
    if (call) {
      call->being_read = false;
      if (call->abandoned) calls_.erase(id);
    }
  }
}

void StoreConnection::read_body(Call& call, Deadline deadline) {
  using Command = proto::Command;
  switch (call.status) {
    case proto::Status::Timeout:
    case proto::Status::Error:
      call.message = read_bytes(proto::kMaxMessageBytes, deadline);
      return;
    case proto::Status::Ok:
      break;
    default:
      fail(ErrorCode::Protocol, "the TcpStore at {} answered with unknown status {}", socket_.endpoint(),
           static_cast<int>(call.status));
  }
  switch (call.command) {
    case Command::Get:
    case Command::CompareSet:
      call.reply.bytes = read_bytes(proto::kMaxValueBytes, deadline);
      return;
    case Command::Add: {
      char bytes[8];
      socket_.receive_exact(bytes, sizeof(bytes), deadline);
      call.reply.number = static_cast<std::int64_t>(proto::get_u64(bytes));
      return;
    }
    case Command::Check:
    case Command::Delete: {
      char flag = 0;
      socket_.receive_exact(&flag, 1, deadline);
      call.reply.flag = flag != 0;
      return;
    }
    case Command::GetMany:
      read_values(call.keys, call.reply.values, deadline);
      return;
    case Command::Set:
    case Command::Wait:
    case Command::Ping:
      return;
  }
}

std::string StoreConnection::read_bytes(std::size_t limit, Deadline deadline) {
  char header[4];
  socket_.receive_exact(header, sizeof(header), deadline);
  auto length = proto::get_u32(header);
  if (length > limit)
    fail(ErrorCode::Protocol, "the TcpStore at {} sent a field of {} bytes (limit {})", socket_.endpoint(),
         length, limit);
  std::string bytes(length, '\0');
  socket_.receive_exact(bytes.data(), length, deadline);
  return bytes;
}

// GET_MANY's OK reply: n, n lengths, the values back to back.
void StoreConnection::read_values(std::size_t expected, std::vector<std::string>& into, Deadline deadline) {
  char header[4];
  socket_.receive_exact(header, sizeof(header), deadline);
  auto count = proto::get_u32(header);
  if (count != expected)
    fail(ErrorCode::Protocol, "the TcpStore at {} answered a GET_MANY of {} keys with {} values",
         socket_.endpoint(), expected, count);
  std::string lengths(4 * static_cast<std::size_t>(count), '\0');
  socket_.receive_exact(lengths.data(), lengths.size(), deadline);
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i) total += proto::get_u32(lengths.data() + 4 * i);
  if (total > proto::kMaxGetManyValueBytes)
    fail(ErrorCode::Protocol, "the TcpStore at {} sent GET_MANY values of {} bytes together (limit {})",
         socket_.endpoint(), total, proto::kMaxGetManyValueBytes);
  std::string bytes(total, '\0');
  socket_.receive_exact(bytes.data(), total, deadline);
  into.reserve(count);
  std::size_t offset = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t length = proto::get_u32(lengths.data() + 4 * i);
    into.emplace_back(bytes, offset, length);
    offset += length;
  }
}

void StoreConnection::break_connection(ErrorCode code, const std::string& why) {
  if (!broken_.empty()) return;
  broken_code_ = code;
  broken_ = why;
  socket_.shutdown();
  changed_.notify_all();
}

}  // namespace canopy::rendezvous
