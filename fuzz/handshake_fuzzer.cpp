// The mesh handshake decoders (transport/tcp/handshake.hpp) on arbitrary bytes: the hello an accepting
// rank reads from whoever connects, and the ack a connecting rank reads back.
// Properties: refusals are Error(Protocol) only; an accepted hello never announces more token bytes
// than the limit; whatever decodes survives encode -> decode unchanged; token comparison is equality.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "fuzz/fuzz_check.hpp"
#include "transport/tcp/handshake.hpp"

namespace transport = canopy::transport;
using canopy::Error;
using canopy::ErrorCode;
using canopy::fuzz::check;

namespace {

void fuzz_hello(const std::byte* bytes, std::size_t size) {
  transport::Hello hello;
  try {
    hello = transport::decode_hello(
        std::span<const std::byte, transport::kHelloSize>(bytes, transport::kHelloSize));
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Protocol, "decode_hello");
    return;
  }
  check(hello.token_bytes <= transport::kMaxTokenBytes, "decode_hello accepted an oversized token length");
  std::size_t available = size - transport::kHelloSize;
  std::string_view token(reinterpret_cast<const char*>(bytes + transport::kHelloSize),
                         std::min<std::size_t>(available, hello.token_bytes));
  auto encoded = transport::encode_hello(hello, token);
  auto again = transport::decode_hello(
      std::span<const std::byte, transport::kHelloSize>(encoded.data(), transport::kHelloSize));
  check(again.comm_id == hello.comm_id && again.rank == hello.rank && again.size == hello.size &&
            again.mesh == hello.mesh && again.token_bytes == token.size(),
        "a hello does not survive encode -> decode");
  std::string_view other(reinterpret_cast<const char*>(bytes), std::min(size, token.size()));
  check(transport::tokens_equal(token, other) == (token == other), "tokens_equal disagrees with ==");
}

void fuzz_ack(const std::byte* bytes) {
  transport::Ack ack;
  try {
    ack = transport::decode_ack(std::span<const std::byte, transport::kAckSize>(bytes, transport::kAckSize));
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Protocol, "decode_ack");
    return;
  }
  check(transport::to_string(ack.status) != "unknown status", "decode_ack accepted an unknown status");
  auto encoded = transport::encode_ack(ack);
  auto again = transport::decode_ack(encoded);
  check(again.status == ack.status && again.comm_id == ack.comm_id && again.rank == ack.rank,
        "an ack does not survive encode -> decode");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  if (size >= transport::kHelloSize) fuzz_hello(bytes, size);
  if (size >= transport::kAckSize) fuzz_ack(bytes);
  return 0;
}
