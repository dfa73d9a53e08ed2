// The TcpStore wire format, shared by the server and the client (docs/RENDEZVOUS.md describes it).
// Little-endian, length-prefixed; every length is checked against a limit before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::rendezvous::protocol {

inline constexpr std::string_view kMagic = "CNPYSTOR";
// 2: every request and reply carries the client's request id, and replies may come out of order.
inline constexpr std::uint16_t kVersion = 2;

inline constexpr std::size_t kMaxKeyBytes = 4 * 1024;
inline constexpr std::size_t kMaxValueBytes = 64 * 1024 * 1024;
inline constexpr std::size_t kMaxKeysPerRequest = 1024;  // CHECK / WAIT
// GET_MANY carries a whole job's keys (a bootstrap's P addresses in one request), so it is bounded by
// bytes, not by a count a job outgrows: its keys together, and its reply's values together (no more than
// one GET's value, so one reply is never larger than the largest single value).
inline constexpr std::size_t kMaxKeysPerGetMany = 256 * 1024;
inline constexpr std::size_t kMaxGetManyKeyBytes = 16 * 1024 * 1024;
inline constexpr std::size_t kMaxGetManyValueBytes = kMaxValueBytes;
inline constexpr std::size_t kMaxTokenBytes = 4 * 1024;
inline constexpr std::size_t kMaxMessageBytes = 64 * 1024;  // the text of an ERROR / TIMEOUT reply
// Requests of one connection that may wait for keys at once (GET / WAIT / GET_MANY), and their keys'
// bytes together: past either, a waiting request is answered ERROR at once and the connection stays.
inline constexpr std::size_t kMaxPendingWaitsPerConnection = 64;
inline constexpr std::size_t kMaxPendingKeyBytesPerConnection = kMaxGetManyKeyBytes;

// Sent by the server after the hello, then the connection is closed unless it is kHelloOk.
enum class HelloStatus : std::uint8_t { Ok = 0, BadToken = 1, BadVersion = 2 };

// Every request is u32 id, u8 command, then its fields; every reply is u32 id (its request's), u8 status,
// then its fields.
enum class Command : std::uint8_t {
  Set = 1,         // key, value                      -> OK
  Get = 2,         // key, u64 timeout ms             -> OK value | TIMEOUT message
  Add = 3,         // key, i64 delta                  -> OK i64
  CompareSet = 4,  // key, expected, desired          -> OK value
  Check = 5,       // u32 n, n keys                   -> OK u8 (1: all exist)
  Wait = 6,        // u32 n, n keys, u64 timeout ms   -> OK | TIMEOUT message
  Delete = 7,      // key                             -> OK u8 (1: existed)
  Ping = 8,        //                                 -> OK
  GetMany = 9,     // u32 n, n keys, u64 timeout ms   -> OK u32 n, n u32 lengths, n values | TIMEOUT
};

enum class Status : std::uint8_t { Ok = 0, Timeout = 1, Error = 2 };

std::string_view to_string(Command command);

// One decoded request. Only the members its command uses are filled.
struct Request {
  std::uint32_t id = 0;  // chosen by the client; its reply carries it back
  Command command = Command::Ping;
  std::vector<std::string> keys;  // one key, except for Check / Wait / GetMany
  std::string value;              // Set: value; CompareSet: expected
  std::string desired;            // CompareSet
  std::int64_t delta = 0;         // Add
  std::uint64_t timeout_ms = 0;   // Get / Wait / GetMany
};

// The outcome of looking at the front of a receive buffer.
struct ParseResult {
  enum class Kind { Incomplete, Complete, Malformed } kind = Kind::Incomplete;
  std::size_t consumed = 0;  // Complete: bytes the request occupied
  std::uint32_t id = 0;      // Malformed: the request's id once its 4 bytes arrived (0 before), for the reply
  std::string error;         // Malformed: why, for the ERROR reply and the log
};

// Decodes the request at the front of `buffer` into `request`. Never reads past the buffer, never
// allocates more than the limits allow; an Incomplete result costs O(number of fields).
ParseResult parse_request(std::string_view buffer, Request& request);

// The hello at the front of a new connection's bytes: magic, version, the job token. A wrong magic is
// Malformed as soon as its first bytes are here (an HTTP probe need not wait for more); a version other
// than kVersion is Complete, for the server to answer BadVersion.
struct HelloParse {
  ParseResult::Kind kind = ParseResult::Kind::Incomplete;
  std::size_t consumed = 0;  // Complete: bytes the hello occupied
  std::uint16_t version = 0;
  std::string_view token;    // Complete: within the buffer
  std::string error;         // Malformed: why
};
HelloParse parse_hello(std::string_view buffer);

// Client side: the bytes of one request.
std::string encode_request(const Request& request);
std::string encode_hello(std::string_view token);

// The fixed-size front of a hello: magic, version, token length.
inline constexpr std::size_t kHelloHeaderBytes = kMagic.size() + 2 + 4;
// The fixed-size front of a reply: request id, status.
inline constexpr std::size_t kReplyHeaderBytes = 4 + 1;

// Little-endian integers, appended to or read from a byte string.
void put_u8(std::string& out, std::uint8_t value);
void put_u16(std::string& out, std::uint16_t value);
void put_u32(std::string& out, std::uint32_t value);
void put_u64(std::string& out, std::uint64_t value);
void put_bytes(std::string& out, std::string_view bytes);  // u32 length + bytes
std::uint16_t get_u16(const char* data);
std::uint32_t get_u32(const char* data);
std::uint64_t get_u64(const char* data);

// Server side: the bytes of one reply to request `id`.
std::string encode_ok(std::uint32_t id);
std::string encode_ok_bytes(std::uint32_t id, std::string_view bytes);
// encode_ok_bytes's front without the bytes, for a server that sends them from where they are.
std::string encode_ok_bytes_head(std::uint32_t id, std::size_t size);
std::string encode_ok_i64(std::uint32_t id, std::int64_t value);
std::string encode_ok_flag(std::uint32_t id, bool flag);
// GET_MANY's reply: the lengths first, so that a client reads the values in three receives, not 2n, and
// knows their total before it allocates.
std::string encode_ok_values(std::uint32_t id, const std::vector<std::string_view>& values);
std::string encode_failure(std::uint32_t id, Status status, std::string_view message);

}  // namespace canopy::rendezvous::protocol
