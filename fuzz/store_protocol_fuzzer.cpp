// The TcpStore request parser (rendezvous/store_protocol.hpp) on arbitrary bytes, read the way the
// server reads a connection: request after request until one is incomplete or malformed. The same bytes
// as a connection's hello: a complete one lies inside the buffer with a token within the limit.
// Properties: a complete request (its id included) occupies bytes inside the buffer and encodes back to
// exactly them; every shorter prefix of it is Incomplete (never Malformed, never Complete); a malformed one
// says why.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_check.hpp"
#include "rendezvous/store_protocol.hpp"

namespace protocol = canopy::rendezvous::protocol;
using canopy::fuzz::check;
using Kind = protocol::ParseResult::Kind;

namespace {

void check_prefixes_incomplete(std::string_view request_bytes) {
  // Every prefix for short requests; for long ones the first bytes and a sample, to stay fast.
  const std::size_t n = request_bytes.size();
  const std::size_t stride = n <= 512 ? 1 : n / 64;
  for (std::size_t cut = 0; cut < n; cut += (cut < 64 ? 1 : stride)) {
    protocol::Request ignored;
    auto prefix = protocol::parse_request(request_bytes.substr(0, cut), ignored);
    check(prefix.kind == Kind::Incomplete, "a prefix of a complete request is not Incomplete");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view buffer(reinterpret_cast<const char*>(data), size);
  const protocol::HelloParse hello = protocol::parse_hello(buffer);
  if (hello.kind == Kind::Complete)
    check(hello.consumed <= size && hello.token.size() <= protocol::kMaxTokenBytes &&
              hello.consumed == protocol::kHelloHeaderBytes + hello.token.size(),
          "a hello outside the buffer or its limit");
  if (hello.kind == Kind::Malformed) check(!hello.error.empty(), "a malformed hello without a reason");
  while (!buffer.empty()) {
    protocol::Request request;
    auto result = protocol::parse_request(buffer, request);
    if (result.kind == Kind::Incomplete) return 0;
    if (result.kind == Kind::Malformed) {
      check(!result.error.empty(), "a malformed request without a reason");
      check(result.error.size() <= protocol::kMaxMessageBytes, "the reason does not fit an ERROR reply");
      return 0;
    }
    check(result.consumed > 0 && result.consumed <= buffer.size(), "consumed bytes outside the buffer");
    check(
        request.keys.size() <= (request.command == protocol::Command::GetMany ? protocol::kMaxKeysPerGetMany
                                                                              : protocol::kMaxKeysPerRequest),
        "more keys than the limit");
    for (const auto& key : request.keys)
      check(key.size() <= protocol::kMaxKeyBytes, "a key beyond the limit");
    check(request.value.size() <= protocol::kMaxValueBytes &&
              request.desired.size() <= protocol::kMaxValueBytes,
          "a value beyond the limit");
    std::string_view occupied = buffer.substr(0, result.consumed);
    check(protocol::encode_request(request) == occupied,
          "a parsed request does not encode back to its bytes");
    check_prefixes_incomplete(occupied);
    buffer.remove_prefix(result.consumed);
  }
  return 0;
}
