// One multiplexed connection to a TcpStore server, shared by every thread and every handle of one
// client: each request carries an id, and each caller waits for the reply with its id, so a GET that
// waits minutes for a key never holds back a SET sent after it. No thread of its own: whichever caller
// holds the read role reads the replies and hands the others theirs.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "rendezvous/client_socket.hpp"
#include "rendezvous/store_protocol.hpp"

namespace canopy::rendezvous {

// Where a client connected, and with which job token.
struct ServerAddress {
  std::string host;
  std::uint16_t port = 0;
  std::string job_token;
};

// An OK reply's fields: which are filled depends on the request's command.
struct StoreReply {
  std::string bytes;                // GET, COMPARE_SET
  std::int64_t number = 0;          // ADD
  bool flag = false;                // CHECK, DELETE
  std::vector<std::string> values;  // GET_MANY
};

class StoreConnection {
 public:
  // Connects and presents the hello; throws Error naming the server when it refuses or is not one.
  StoreConnection(const ServerAddress& address, Duration connect_timeout);
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  // Sends `request` (its id is chosen here) and returns its OK reply. Throws Error(Timeout) or
  // Error(InvalidArgument) for the server's TIMEOUT / ERROR (the connection stays usable), Error(Timeout)
  // when no reply came by `deadline` (this caller alone gives up while other replies still come), and
  // Error(PeerFailed) with the same reason for every caller once the connection itself failed. A request
  // whose deadline passes with nothing at all heard from the server since it was sent fails the
  // connection (Error(Timeout) for every caller): the server or the path to it is gone (stopped, cut off),
  // and no later request should wait its whole deadline to learn it again. `what` names the call.
  StoreReply call(protocol::Request request, Deadline deadline, const std::string& what);

  const std::string& endpoint() const { return socket_.endpoint(); }

 private:
  // One request sent and not yet answered.
  struct Call {
    protocol::Command command = protocol::Command::Ping;
    std::size_t keys = 0;  // GET_MANY: the values its reply must carry
    Deadline deadline = Deadline::never();
    Clock::time_point sent{};  // when it was written, to tell whether the server said anything since
    bool done = false;
    bool abandoned = false;   // its caller gave up: the reply, when it comes, is read and dropped
    bool being_read = false;  // the reader writes its reply: only the reader may erase it
    protocol::Status status = protocol::Status::Ok;
    std::string message;  // TIMEOUT / ERROR
    StoreReply reply;
  };

  StoreConnection(const ServerAddress& address, Deadline deadline);
  void hello(const std::string& token, Deadline deadline);
  bool still_listening() const;
  // Whether bytes from the server wait unread on the socket, without waiting for any.
  bool reply_waiting();
  // The read role: waits for one reply up to `deadline` and hands it to its caller.
  void read_one(Deadline deadline);
  void read_body(Call& call, Deadline deadline);
  std::string read_bytes(std::size_t limit, Deadline deadline);
  void read_values(std::size_t expected, std::vector<std::string>& into, Deadline deadline);
  // Under mutex_: every waiting and later caller fails with `why`.
  void break_connection(ErrorCode code, const std::string& why);

  const ServerAddress address_;
  ClientSocket socket_;
  std::mutex write_mutex_;  // one request's bytes at a time on the socket

  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::unordered_map<std::uint32_t, Call> calls_;  // by request id; nodes stay put while others come and go
  std::uint32_t next_id_ = 1;
  bool reading_ = false;            // a caller holds the read role
  Clock::time_point last_heard_{};  // when the last reply began to arrive
  ErrorCode broken_code_ = ErrorCode::PeerFailed;
  std::string broken_;  // why the connection is unusable, once it is
};

}  // namespace canopy::rendezvous
