#include "bench/p2p/links.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>

#include "common/error.hpp"

namespace canopy::bench {
namespace {

constexpr auto kStepTimeout = std::chrono::seconds(60);

transport::Envelope envelope_for(std::size_t bytes) {
  transport::Envelope e;
  e.comm_id = 1;
  e.count = bytes;
  return e;
}

}  // namespace

void CanopyLink::send(std::span<const std::byte> bytes) {
  transport::send(transport_, peer_, envelope_for(bytes.size()), bytes, Deadline::after(kStepTimeout));
}

void CanopyLink::recv(std::span<std::byte> bytes) {
  transport::recv(transport_, peer_, envelope_for(bytes.size()), bytes, Deadline::after(kStepTimeout));
}

void CanopyLink::exchange(std::span<const std::byte> out, std::span<std::byte> in) {
  transport_.post_send(peer_, envelope_for(out.size()), out);
  transport_.post_recv(peer_, envelope_for(in.size()), in);
  Deadline deadline = Deadline::after(kStepTimeout);
  done_.clear();
  while (done_.size() < 2)
    if (!transport_.progress(deadline, done_)) fail(ErrorCode::Timeout, "exchange timed out");
}

void PlainSocketLink::send(std::span<const std::byte> bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + sent, bytes.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_errno("plain socket write");
    sent += static_cast<std::size_t>(n);
  }
}

void PlainSocketLink::recv(std::span<std::byte> bytes) {
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd_, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail(ErrorCode::PeerFailed, "plain socket read: {}", n == 0 ? "closed" : std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
}

void PlainSocketLink::exchange(std::span<const std::byte> out, std::span<std::byte> in) {
  // Blocking sockets need a second thread to write while this one reads.
  std::exception_ptr writer_error;
  std::thread writer([&] {
    try {
      send(out);
    } catch (...) {
      writer_error = std::current_exception();
    }
  });
  std::exception_ptr reader_error;
  try {
    recv(in);
  } catch (...) {
    reader_error = std::current_exception();
  }
  writer.join();
  if (reader_error) std::rethrow_exception(reader_error);
  if (writer_error) std::rethrow_exception(writer_error);
}

}  // namespace canopy::bench
