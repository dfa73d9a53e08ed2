#include "rendezvous/store_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace canopy::rendezvous::protocol {
namespace {

using Kind = ParseResult::Kind;

// What the fields of one request may take between them, beyond each field's own limit.
struct Budget {
  std::size_t left;
  const std::size_t limit;
};

// Walks the front of a buffer. A read past its end marks the cursor incomplete; a length beyond a
// limit marks it malformed. The first problem sticks, so a parse can read all fields, then look once.
class Cursor {
 public:
  explicit Cursor(std::string_view buffer) : buffer_(buffer) {}

  bool ok() const { return kind_ == Kind::Complete; }
  std::size_t position() const { return position_; }

  std::optional<std::uint8_t> u8() {
    if (!have(1)) return std::nullopt;
    return static_cast<std::uint8_t>(buffer_[position_++]);
  }
  std::optional<std::uint32_t> u32() {
    if (!have(4)) return std::nullopt;
    auto value = get_u32(buffer_.data() + position_);
    position_ += 4;
    return value;
  }
  std::optional<std::uint64_t> u64() {
    if (!have(8)) return std::nullopt;
    auto value = get_u64(buffer_.data() + position_);
    position_ += 8;
    return value;
  }
  // A u32 length + bytes field of at most `limit` bytes, named `what` in the error. `together`, when
  // given, is what this request's fields may still take between them; the field's length comes off it.
  std::optional<std::string> bytes(std::size_t limit, std::string_view what, Budget* together = nullptr) {
    auto n = length(limit, what, together);
    if (!n || !have(*n)) return std::nullopt;
    std::string result(buffer_.substr(position_, *n));
    position_ += *n;
    return result;
  }
  // A length field's bytes are skipped without copying while the rest has not arrived: an
  // Incomplete parse must stay cheap for a 64 MiB value arriving 64 KiB at a time.
  bool skip_bytes(std::size_t limit, std::string_view what, Budget* together = nullptr) {
    auto n = length(limit, what, together);
    if (!n || !have(*n)) return false;
    position_ += *n;
    return true;
  }

  void malformed(std::string why) {
    if (kind_ != Kind::Complete) return;
    kind_ = Kind::Malformed;
    error_ = std::move(why);
  }

  ParseResult result() const {
    ParseResult r;
    r.kind = kind_;
    if (kind_ == Kind::Complete) r.consumed = position_;
    if (kind_ == Kind::Malformed) r.error = error_;
    return r;
  }

 private:
  bool have(std::size_t n) {
    if (kind_ != Kind::Complete) return false;
    if (buffer_.size() - position_ < n) {
      kind_ = Kind::Incomplete;
      return false;
    }
    return true;
  }

  // Judged from the length field alone, before the bytes it announces arrive.
  std::optional<std::uint32_t> length(std::size_t limit, std::string_view what, Budget* together) {
    auto n = u32();
    if (!n) return std::nullopt;
    if (*n > limit) {
      malformed(fmt::format("{} of {} bytes exceeds the limit of {} bytes", what, *n, limit));
      return std::nullopt;
    }
    if (together) {
      if (*n > together->left) {
        malformed(fmt::format("the {}s of one request exceed the limit of {} bytes together", what,
                              together->limit));
        return std::nullopt;
      }
      together->left -= *n;
    }
    return n;
  }

  std::string_view buffer_;
  std::size_t position_ = 0;
  Kind kind_ = Kind::Complete;
  std::string error_;
};

// The fields after the command byte, per command: used twice, first to skip (is it all here?), then
// to copy. `copy` false only checks lengths.
void read_fields(Cursor& in, Command command, Request& request, bool copy) {
  Budget key_bytes{kMaxGetManyKeyBytes, kMaxGetManyKeyBytes};  // GET_MANY's keys together
  auto key = [&](std::string_view what, Budget* together = nullptr) {
    if (!copy) return void(in.skip_bytes(kMaxKeyBytes, what, together));
    if (auto k = in.bytes(kMaxKeyBytes, what, together)) request.keys.push_back(std::move(*k));
  };
  auto value = [&](std::string& into, std::string_view what) {
    if (!copy) return void(in.skip_bytes(kMaxValueBytes, what));
    if (auto v = in.bytes(kMaxValueBytes, what)) into = std::move(*v);
  };
  switch (command) {
    case Command::Set:
      key("key");
      value(request.value, "value");
      break;
    case Command::Get:
      key("key");
      if (auto t = in.u64()) request.timeout_ms = *t;
      break;
    case Command::Add:
      key("key");
      if (auto d = in.u64()) request.delta = static_cast<std::int64_t>(*d);
      break;
    case Command::CompareSet:
      key("key");
      value(request.value, "expected value");
      value(request.desired, "desired value");
      break;
    case Command::Check:
    case Command::Wait:
    case Command::GetMany: {
      auto count = in.u32();
      if (!count) break;
      const bool many = command == Command::GetMany;
      const std::size_t most = many ? kMaxKeysPerGetMany : kMaxKeysPerRequest;
      if (*count > most) {
        in.malformed(
            fmt::format("{} keys in one {} exceed the limit of {}", *count, to_string(command), most));
        break;
      }
      // Only the copying pass reserves, and it runs once every key has arrived: 32 bytes of vector for
      // each 4-byte length field received, never a count the sender merely claims.
      if (copy) request.keys.reserve(*count);
      for (std::uint32_t i = 0; i < *count && in.ok(); ++i) key("key", many ? &key_bytes : nullptr);
      if (command != Command::Check) {
        if (auto t = in.u64()) request.timeout_ms = *t;
      }
      break;
    }
    case Command::Delete:
      key("key");
      break;
    case Command::Ping:
      break;
  }
}

bool known_command(std::uint8_t byte) {
  return byte >= static_cast<std::uint8_t>(Command::Set) &&
         byte <= static_cast<std::uint8_t>(Command::GetMany);
}

}  // namespace

std::string_view to_string(Command command) {
  switch (command) {
    case Command::Set:
      return "SET";
    case Command::Get:
      return "GET";
    case Command::Add:
      return "ADD";
    case Command::CompareSet:
      return "COMPARE_SET";
    case Command::Check:
      return "CHECK";
    case Command::Wait:
      return "WAIT";
    case Command::Delete:
      return "DELETE";
    case Command::Ping:
      return "PING";
    case Command::GetMany:
      return "GET_MANY";
  }
  return "UNKNOWN";
}

ParseResult parse_request(std::string_view buffer, Request& request) {
  Cursor probe(buffer);
  auto id = probe.u32();
  if (!id) return probe.result();
  auto with_id = [&](ParseResult result) {
    if (result.kind == Kind::Malformed) result.id = *id;
    return result;
  };
  auto byte = probe.u8();
  if (!byte) return probe.result();
  if (!known_command(*byte)) {
    probe.malformed(fmt::format("unknown command byte {}", *byte));
    return with_id(probe.result());
  }
  auto command = static_cast<Command>(*byte);
  read_fields(probe, command, request, /*copy=*/false);
  if (!probe.ok()) return with_id(probe.result());

  request = Request{};
  request.id = *id;
  request.command = command;
  Cursor in(buffer);
  in.u32();
  in.u8();
  read_fields(in, command, request, /*copy=*/true);
  return in.result();
}

void put_u8(std::string& out, std::uint8_t value) {
  out.push_back(static_cast<char>(value));
}
void put_u16(std::string& out, std::uint16_t value) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<std::uint32_t>(bytes.size()));
  out.append(bytes);
}

std::uint16_t get_u16(const char* data) {
  auto b = reinterpret_cast<const unsigned char*>(data);
  return static_cast<std::uint16_t>(b[0] | (b[1] << 8));
}
std::uint32_t get_u32(const char* data) {
  auto b = reinterpret_cast<const unsigned char*>(data);
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | b[i];
  return value;
}
std::uint64_t get_u64(const char* data) {
  auto b = reinterpret_cast<const unsigned char*>(data);
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | b[i];
  return value;
}

std::string encode_request(const Request& request) {
  std::string out;
  put_u32(out, request.id);
  put_u8(out, static_cast<std::uint8_t>(request.command));
  auto key = [&] { put_bytes(out, request.keys.empty() ? std::string_view() : request.keys.front()); };
  switch (request.command) {
    case Command::Set:
      key();
      put_bytes(out, request.value);
      break;
    case Command::Get:
      key();
      put_u64(out, request.timeout_ms);
      break;
    case Command::Add:
      key();
      put_u64(out, static_cast<std::uint64_t>(request.delta));
      break;
    case Command::CompareSet:
      key();
      put_bytes(out, request.value);
      put_bytes(out, request.desired);
      break;
    case Command::Check:
    case Command::Wait:
    case Command::GetMany:
      put_u32(out, static_cast<std::uint32_t>(request.keys.size()));
      for (const auto& k : request.keys) put_bytes(out, k);
      if (request.command != Command::Check) put_u64(out, request.timeout_ms);
      break;
    case Command::Delete:
      key();
      break;
    case Command::Ping:
      break;
  }
  return out;
}

std::string encode_hello(std::string_view token) {
  std::string out(kMagic);
  put_u16(out, kVersion);
  put_bytes(out, token);
  return out;
}

HelloParse parse_hello(std::string_view buffer) {
  HelloParse hello;
  const std::string_view magic = buffer.substr(0, std::min(buffer.size(), kMagic.size()));
  if (magic != kMagic.substr(0, magic.size())) {
    hello.kind = ParseResult::Kind::Malformed;
    hello.error = "it is not a Canopy store client (bad magic)";
    return hello;
  }
  if (buffer.size() < kHelloHeaderBytes) return hello;
  hello.version = get_u16(buffer.data() + kMagic.size());
  const std::uint32_t token_length = get_u32(buffer.data() + kMagic.size() + 2);
  if (token_length > kMaxTokenBytes) {
    hello.kind = ParseResult::Kind::Malformed;
    hello.error = fmt::format("its job token of {} bytes exceeds the limit of {}", token_length, kMaxTokenBytes);
    return hello;
  }
  if (buffer.size() < kHelloHeaderBytes + token_length) return hello;
  hello.kind = ParseResult::Kind::Complete;
  hello.token = buffer.substr(kHelloHeaderBytes, token_length);
  hello.consumed = kHelloHeaderBytes + token_length;
  return hello;
}

namespace {

std::string reply_head(std::uint32_t id, Status status, std::size_t reserve = 0) {
  std::string out;
  out.reserve(kReplyHeaderBytes + reserve);
  put_u32(out, id);
  put_u8(out, static_cast<std::uint8_t>(status));
  return out;
}

}  // namespace

std::string encode_ok(std::uint32_t id) {
  return reply_head(id, Status::Ok);
}
std::string encode_ok_bytes(std::uint32_t id, std::string_view bytes) {
  std::string out = reply_head(id, Status::Ok, 4 + bytes.size());
  put_bytes(out, bytes);
  return out;
}
std::string encode_ok_bytes_head(std::uint32_t id, std::size_t size) {
  std::string out = reply_head(id, Status::Ok, 4);
  put_u32(out, static_cast<std::uint32_t>(size));
  return out;
}
std::string encode_ok_i64(std::uint32_t id, std::int64_t value) {
  std::string out = reply_head(id, Status::Ok, 8);
  put_u64(out, static_cast<std::uint64_t>(value));
  return out;
}
std::string encode_ok_flag(std::uint32_t id, bool flag) {
  std::string out = reply_head(id, Status::Ok, 1);
  put_u8(out, flag ? 1 : 0);
  return out;
}
std::string encode_ok_values(std::uint32_t id, const std::vector<std::string_view>& values) {
  std::size_t total = 0;
  for (auto value : values) total += value.size();
  std::string out = reply_head(id, Status::Ok, 4 + 4 * values.size() + total);
  put_u32(out, static_cast<std::uint32_t>(values.size()));
  for (auto value : values) put_u32(out, static_cast<std::uint32_t>(value.size()));
  for (auto value : values) out.append(value);
  return out;
}
std::string encode_failure(std::uint32_t id, Status status, std::string_view message) {
  message = message.substr(0, kMaxMessageBytes);
  std::string out = reply_head(id, status, 4 + message.size());
  put_bytes(out, message);
  return out;
}

}  // namespace canopy::rendezvous::protocol
