#include "rendezvous/etcd_client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/base64.hpp"
#include "rendezvous/curl_library.hpp"

namespace canopy::rendezvous {
namespace {

using namespace std::chrono_literals;

// One request to one member: an answer takes milliseconds; a member that takes longer is stuck (cut off
// from its peers, or holding a proposal that an election dropped, which etcd answers only after seconds) and
// the next member is tried. The first two attempts that time out get 250 ms, each next two twice as long,
// up to 4 s, so that a slow but healthy cluster still answers.
constexpr auto kFirstAttemptLimit = 250ms;
constexpr auto kLongestAttemptLimit = 4000ms;
constexpr auto kConnectLimit = 1000ms;
constexpr auto kFirstRoundPause = 10ms;
constexpr auto kLongestRoundPause = 100ms;

// gRPC's status codes that mean "this member cannot answer now" (Unavailable: no leader, no quorum, a
// request timed out inside etcd; DeadlineExceeded; Canceled; Unknown: the gateway lost its member).
bool is_transient(int grpc_code) {
  return grpc_code == 14 || grpc_code == 4 || grpc_code == 1 || grpc_code == 2;
}

long milliseconds_until(Deadline deadline, Clock::duration cap) {
  auto left = std::min<Clock::duration>(deadline.remaining(), cap);
  return std::max<long>(
      1, static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
}

size_t append_to_string(char* data, size_t size, size_t count, void* target) {
  static_cast<std::string*>(target)->append(data, size * count);
  return size * count;
}

// What the stream of a watch said so far; the callback stops the transfer once it knows the answer.
struct WatchStream {
  std::string pending;  // the part of a line not yet complete
  EtcdClient::WatchEnd end = EtcdClient::WatchEnd::Interrupted;
  bool decided = false;

  // One line of the stream: {"result": {...}} or {"error": {...}}.
  void take_line(std::string_view line) {
    auto message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded() || !message.is_object()) return;
    auto result = message.find("result");
    if (result == message.end()) {
      decided = true;  // an error: read the key again, perhaps on another member
      return;
    }
    if (result->value("canceled", false) || json_int(*result, "compact_revision") != 0) {
      decided = true;
      return;
    }
    auto events = result->find("events");
    if (events == result->end()) return;
    for (const auto& event : *events) {
      if (event.value("type", std::string("PUT")) == "PUT") {
        end = EtcdClient::WatchEnd::Put;
        decided = true;
        return;
      }
    }
  }

  static size_t receive(char* data, size_t size, size_t count, void* self_pointer) {
    auto* self = static_cast<WatchStream*>(self_pointer);
    self->pending.append(data, size * count);
    std::size_t newline;
    while (!self->decided && (newline = self->pending.find('\n')) != std::string::npos) {
      self->take_line(std::string_view(self->pending).substr(0, newline));
      self->pending.erase(0, newline + 1);
    }
    return self->decided ? 0 : size * count;  // 0 stops the transfer
  }
};

}  // namespace

std::int64_t json_int(const nlohmann::json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const std::string& text = it->get_ref<const std::string&>();
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail(ErrorCode::Protocol, "etcd store: {} in etcd's answer is not an int64: {}", field,
         text.substr(0, 40));
  return value;
}

struct EtcdClient::Handle {
  Handle() : curl(curl_library()), easy(curl.easy_init()) {
    if (!easy) fail(ErrorCode::Resource, "etcd store: libcurl could not make a handle (curl_easy_init)");
    headers = curl.slist_append(nullptr, "Content-Type: application/json");
    headers = curl.slist_append(headers, "Expect:");  // no 100-continue round trip before a large body
    // gRPC metadata "hasleader": a member without a leader refuses a request at once, and ends a watch it
    // holds, instead of holding either while it is cut off from the majority.
    headers = curl.slist_append(headers, "Grpc-Metadata-hasleader: true");
  }
  ~Handle() {
    curl.slist_free_all(headers);
    curl.easy_cleanup(easy);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // One POST; the transfer's own result, the HTTP status in `status`.
  CURLcode post(const std::string& url, const std::string& body, long timeout_ms, long& status,
                curl_write_callback receive, void* target) {
    curl.easy_reset(easy);
    error[0] = '\0';
    curl.easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl.easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl.easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
    curl.easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl.easy_setopt(easy, CURLOPT_WRITEFUNCTION, receive);
    curl.easy_setopt(easy, CURLOPT_WRITEDATA, target);
    curl.easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl.easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     std::min(timeout_ms, static_cast<long>(kConnectLimit.count())));
    curl.easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM from name resolution: threads call this
    curl.easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl.easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
    CURLcode code = curl.easy_perform(easy);
    status = 0;
    curl.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    return code;
  }

  std::string describe(CURLcode code) const {
    return error[0] != '\0' ? std::string(error) : std::string(curl.easy_strerror(code));
  }

  const CurlLibrary& curl;
  CURL* easy;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE];
};

EtcdClient::EtcdClient(EtcdAddress address) : address_(std::move(address)) {
  curl_library();  // a build or machine without libcurl fails here, when the store opens
}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::describe() const {
  std::string members;
  for (const auto& endpoint : address_.endpoints) members += (members.empty() ? "" : ", ") + endpoint;
  return fmt::format("the etcd store {} (members {})", address_.text, members);
}

std::unique_ptr<EtcdClient::Handle> EtcdClient::take_handle() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      auto handle = std::move(idle_.back());
      idle_.pop_back();
      return handle;
    }
  }
  return std::make_unique<Handle>();
}

void EtcdClient::give_back(std::unique_ptr<Handle> handle) {
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(handle));
}

nlohmann::json EtcdClient::call(std::string_view path, const nlohmann::json& request, Deadline deadline,
                                std::string_view what) {
  const std::string body = request.dump();
  auto handle = take_handle();
  std::vector<std::string> failures(address_.endpoints.size());
  std::size_t member;
  {
    std::lock_guard lock(mutex_);
    member = preferred_;
  }
  auto pause = Clock::duration(kFirstRoundPause);
  std::size_t timed_out = 0;  // attempts that ran out of time (not those a member refused at once)
  for (std::size_t tried = 0;; ++tried) {
    const std::string& endpoint = address_.endpoints[member];
    std::string response;
    long status = 0;
    // With one member there is no other to try: a resent request would only queue behind the first.
    const auto attempt_limit =
        address_.endpoints.size() == 1
            ? deadline.remaining()
            : std::min<Clock::duration>(kFirstAttemptLimit * (1 << std::min<std::size_t>(timed_out / 2, 4)),
                                        kLongestAttemptLimit);
    CURLcode code =
        handle->post(endpoint + std::string(path), body, milliseconds_until(deadline, attempt_limit), status,
                     append_to_string, &response);
    if (code == CURLE_OK && status == 200) {
      auto answer = nlohmann::json::parse(response, nullptr, false);
      if (!answer.is_object())
        fail(ErrorCode::Protocol, "{} on {}: member {} answered something that is not JSON: {}", what,
             describe(), endpoint, response.substr(0, 200));
      give_back(std::move(handle));
      std::lock_guard lock(mutex_);
      preferred_ = member;
      return answer;
    }
    if (code == CURLE_OK) {
      auto error = nlohmann::json::parse(response, nullptr, false);
      const int grpc_code = error.is_object() ? error.value("code", 0) : 0;
      const std::string message = error.is_object()
                                      ? error.value("message", response)
                                      : fmt::format("HTTP {}: {}", status, response.substr(0, 200));
      if (!is_transient(grpc_code) && status < 500) {
        give_back(std::move(handle));
        // etcd's own limit, or gRPC's a little above it (--max-request-bytes + 512 KiB).
        const bool too_large = message.find("too large") != std::string::npos ||
                               message.find("larger than max") != std::string::npos;
        fail(ErrorCode::InvalidArgument, "{} on {}: etcd refused the request ({} bytes of JSON): {}{}", what,
             describe(), body.size(), message,
             too_large ? " (etcd's --max-request-bytes, 1.5 MiB by default, bounds a request's key and value)"
                       : "");
      }
      failures[member] = message;
    } else {
      failures[member] = handle->describe(code);
      if (code == CURLE_OPERATION_TIMEDOUT) ++timed_out;
    }
    log::debug("etcd store: {} on {} failed: {}; trying the next member", what, endpoint, failures[member]);
    member = (member + 1) % address_.endpoints.size();
    if (deadline.expired()) break;
    if ((tried + 1) % address_.endpoints.size() == 0) {
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline.remaining()));
      pause = std::min<Clock::duration>(pause * 2, kLongestRoundPause);
    }
  }
  give_back(std::move(handle));
  std::string reasons;
  for (std::size_t i = 0; i < failures.size(); ++i)
    reasons += fmt::format("{}{}: {}", i ? "; " : "", address_.endpoints[i],
                           failures[i].empty() ? "not tried" : failures[i]);
  fail(ErrorCode::PeerFailed,
       "{} on {}: no member answered by the deadline (is a majority of the cluster running and reachable?): "
       "{}",
       what, describe(), reasons);
}

EtcdClient::WatchEnd EtcdClient::watch_for_put(std::string_view key, std::int64_t start_revision,
                                               Deadline deadline) {
  if (deadline.expired()) return WatchEnd::Deadline;
  nlohmann::json request = {
      {"create_request", {{"key", base64_encode(key)}, {"start_revision", std::to_string(start_revision)}}}};
  const std::string body = request.dump();
  std::size_t member;
  {
    std::lock_guard lock(mutex_);
    member = preferred_;
  }
  auto handle = take_handle();
  WatchStream stream;
  long status = 0;
  CURLcode code = handle->post(address_.endpoints[member] + "/v3/watch", body,
                               milliseconds_until(deadline, Clock::duration::max()), status,
                               &WatchStream::receive, &stream);
  give_back(std::move(handle));
  if (stream.end == WatchEnd::Put) return WatchEnd::Put;
  if (deadline.expired()) return WatchEnd::Deadline;
  // The member went away or refused: the caller reads again (on whichever member answers) and watches there.
  log::debug(
      "etcd store: the watch on {} ended early: {}", address_.endpoints[member],
      code == CURLE_OK ? fmt::format("HTTP {}", status) : std::string(curl_library().easy_strerror(code)));
  {
    std::lock_guard lock(mutex_);
    if (preferred_ == member) preferred_ = (member + 1) % address_.endpoints.size();
  }
  std::this_thread::sleep_for(std::min<Clock::duration>(kFirstRoundPause, deadline.remaining()));
  return WatchEnd::Interrupted;
}

}  // namespace canopy::rendezvous
