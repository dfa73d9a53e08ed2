// canopy-store-load: the TcpStore server under a bootstrap of N ranks (default 16,384), each a client
// connection making exactly the requests rendezvous() and an address exchange make:
//
//   canopy-store-load --clients 16384
//
// Rank r claims its rank (COMPARE_SET round/0/rank/<r>), publishes its address (SET round/0/addr/<r>),
// reads its ring neighbour's (GET addr/<r+1 mod N>) and its tree parent's (GET addr/<(r-1)/2>, not rank 0),
// then agrees through rank 0 as agree_through_rank_zero does: rank 0 reads every address in one GET_MANY and
// publishes an answer (SET round/0/layout, 6 bytes a rank, the size of the host layout's), which every rank
// reads (GET). Five requests a rank, six for rank 0 (which has no parent), whatever N is.
//
// The server runs in a forked process of its own (or elsewhere: --connect), so that its memory is its
// own: VmRSS when idle, when every client has connected, and VmHWM at the end, read from /proc/<pid>/status.
// The clients are non-blocking sockets driven by one epoll loop in this process (two cores cannot run
// 16,384 blocking clients' threads), speaking the wire format through rendezvous/store_protocol.hpp; every
// reply is checked. Clients wait until all have connected before their first request, so that the cost of
// connecting and the cost of the requests are told apart (a real job overlaps them).
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "rendezvous/store_protocol.hpp"

namespace {

namespace proto = canopy::rendezvous::protocol;
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

[[noreturn]] void die(const std::string& why) {
  fmt::print(stderr, "canopy-store-load: {}\n", why);
  std::exit(1);
}

// A process that holds a socket per client needs more than the usual soft limit of 1024 descriptors.
void raise_descriptor_limit(std::size_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) die(fmt::format("getrlimit: {}", std::strerror(errno)));
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) die(fmt::format("setrlimit: {}", std::strerror(errno)));
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed)
    die(fmt::format(
        "{} clients need {} descriptors, but RLIMIT_NOFILE's hard limit is {}: raise it (ulimit -Hn, "
        "limits.conf) or run fewer clients",
        needed - 64, needed, limit.rlim_cur));
}

// A field of /proc/<pid>/status in KiB ("VmRSS", "VmHWM"); -1 when absent.
long status_kib(pid_t pid, const std::string& field) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// utime + stime of a process in seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The kernel's TCP memory, all sockets of the machine, in pages (/proc/net/sockstat "TCP: ... mem N").
long tcp_memory_pages() {
  std::ifstream in("/proc/net/sockstat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("TCP:", 0) != 0) continue;
    auto at = line.find(" mem ");
    if (at != std::string::npos) return std::stol(line.substr(at + 5));
  }
  return -1;
}

// The server in a child process forked before any thread exists: its memory is its own.
struct ServerProcess {
  pid_t pid = -1;
  std::uint16_t port = 0;
  int stop_fd = -1;  // closing it tells the child to exit

  static ServerProcess start(const std::string& token, std::size_t clients) {
    int ready[2], stop[2];
    if (::pipe(ready) != 0 || ::pipe(stop) != 0) die(fmt::format("pipe: {}", std::strerror(errno)));
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) die(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
      ::close(ready[0]);
      ::close(stop[1]);
      std::uint16_t port = 0;
      try {
        raise_descriptor_limit(clients + 64);
        canopy::TcpStoreServer server("127.0.0.1", 0, token);
        port = server.port();
        if (::write(ready[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
        char byte;
        while (::read(stop[0], &byte, 1) > 0) {
        }
      } catch (const std::exception& e) {
        fmt::print(stderr, "canopy-store-load: the server failed: {}\n", e.what());
        _exit(1);
      }
      _exit(0);
    }
    ::close(ready[1]);
    ::close(stop[0]);
    ServerProcess server;
    server.pid = pid;
    server.stop_fd = stop[1];
    if (::read(ready[0], &server.port, sizeof(server.port)) != sizeof(server.port))
      die("the server process did not start");
    ::close(ready[0]);
    return server;
  }

  void stop() {
    ::close(stop_fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

// What an OK reply to each request carries after its request id and status byte.
enum class Reply { Hello, Empty, Bytes, Values };

// A reply's request id and status come before its fields; each client here has one request out at a time,
// so the id is not looked at.
constexpr std::size_t kReplyHead = proto::kReplyHeaderBytes;

struct Step {
  std::string request;
  Reply reply;
  // Bytes: the value; Values: the values' bytes back to back. Shared: every rank expects the one answer.
  std::shared_ptr<const std::string> expected;
};

// Bytes that make up one whole reply at the front of `in`, or nothing while it is incomplete. A failure
// status (TIMEOUT, ERROR) ends the run with the server's message.
std::optional<std::size_t> whole_reply(std::string_view in, Reply kind, std::string* failure) {
  if (in.empty()) return std::nullopt;
  if (kind == Reply::Hello) return 1;
  if (in.size() < kReplyHead) return std::nullopt;
  auto status = static_cast<proto::Status>(in[kReplyHead - 1]);
  auto field_end = [&](std::size_t at) -> std::optional<std::size_t> {
    if (in.size() < at + 4) return std::nullopt;
    std::size_t end = at + 4 + proto::get_u32(in.data() + at);
    if (in.size() < end) return std::nullopt;
    return end;
  };
  if (status != proto::Status::Ok) {
    auto end = field_end(kReplyHead);
    if (end) *failure = std::string(in.substr(kReplyHead + 4, *end - kReplyHead - 4));
    return end;
  }
  switch (kind) {
    case Reply::Hello:
    case Reply::Empty:
      return kReplyHead;
    case Reply::Bytes:
      return field_end(kReplyHead);
    case Reply::Values: {
      if (in.size() < kReplyHead + 4) return std::nullopt;
      std::size_t count = proto::get_u32(in.data() + kReplyHead);
      const std::size_t lengths = kReplyHead + 4;
      if (in.size() < lengths + 4 * count) return std::nullopt;
      std::size_t total = 0;
      for (std::size_t i = 0; i < count; ++i) total += proto::get_u32(in.data() + lengths + 4 * i);
      std::size_t end = lengths + 4 * count + total;
      if (in.size() < end) return std::nullopt;
      return end;
    }
  }
  return std::nullopt;
}

// Whether a whole OK reply says what the step expects.
bool reply_matches(std::string_view reply, const Step& step) {
  if (step.reply == Reply::Hello) return reply[0] == static_cast<char>(proto::HelloStatus::Ok);
  if (reply[kReplyHead - 1] != static_cast<char>(proto::Status::Ok)) return false;
  switch (step.reply) {
    case Reply::Hello:
    case Reply::Empty:
      return true;
    case Reply::Bytes:
      return reply.substr(kReplyHead + 4) == *step.expected;
    case Reply::Values: {
      std::size_t count = proto::get_u32(reply.data() + kReplyHead);
      return reply.substr(kReplyHead + 4 + 4 * count) == *step.expected;
    }
  }
  return false;
}

struct Options {
  std::size_t clients = 16384;
  std::size_t value_bytes = 64;
  std::size_t answer_bytes_per_rank = 6;
  std::string connect;  // host:port of a server elsewhere; empty: fork one
  std::string token = "store-load";
  double timeout_s = 300;
};

class Load {
 public:
  explicit Load(const Options& options)
      : options_(options),
        n_(options.clients),
        answer_(std::make_shared<const std::string>(options.answer_bytes_per_rank * n_, 'h')) {
    for (std::size_t r = 0; r < n_; ++r) keys_.push_back(fmt::format("round/0/addr/{}", r));
  }

  std::string address_of(std::size_t r) const {
    std::string value = fmt::format("10.{}.{}.{}:{}", r >> 16, (r >> 8) & 255, r & 255, 20000 + r % 1000);
    value.resize(std::max(options_.value_bytes, value.size()), '.');
    return value;
  }

  // The requests of rank r after its hello, in order.
  std::vector<Step> script(std::size_t r) const {
    std::vector<Step> steps;
    auto just = [](std::string value) { return std::make_shared<const std::string>(std::move(value)); };
    auto request = [](proto::Command command, std::vector<std::string> keys, std::string value = "",
                      std::string desired = "") {
      proto::Request q;
      q.command = command;
      q.keys = std::move(keys);
      q.value = std::move(value);
      q.desired = std::move(desired);
      q.timeout_ms = 120000;
      return proto::encode_request(q);
    };
    std::string me = fmt::format("load-host pid {} (rank {})", ::getpid(), r);
    steps.push_back({request(proto::Command::CompareSet, {fmt::format("round/0/rank/{}", r)}, "", me),
                     Reply::Bytes, just(me)});
    steps.push_back({request(proto::Command::Set, {keys_[r]}, address_of(r)), Reply::Empty, nullptr});
    std::size_t next = (r + 1) % n_;
    steps.push_back({request(proto::Command::Get, {keys_[next]}), Reply::Bytes, just(address_of(next))});
    if (r > 0) {
      std::size_t parent = (r - 1) / 2;
      steps.push_back(
          {request(proto::Command::Get, {keys_[parent]}), Reply::Bytes, just(address_of(parent))});
    }
    if (options_.answer_bytes_per_rank > 0) {
      if (r == 0) {
        std::string all;
        for (std::size_t peer = 0; peer < n_; ++peer) all += address_of(peer);
        steps.push_back({request(proto::Command::GetMany, keys_), Reply::Values, just(std::move(all))});
        steps.push_back({request(proto::Command::Set, {"round/0/layout"}, *answer_), Reply::Empty, nullptr});
      }
      steps.push_back({request(proto::Command::Get, {"round/0/layout"}), Reply::Bytes, answer_});
    }
    return steps;
  }

  void run(const std::string& host, std::uint16_t port, pid_t server_pid) {
    server_pid_ = server_pid;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1)
      die(fmt::format("'{}' is not an IPv4 address", host));
    address_ = address;
    loopback_ = (ntohl(address.sin_addr.s_addr) >> 24) == 127;
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) die(fmt::format("epoll_create1: {}", std::strerror(errno)));
    clients_.resize(n_);
    for (std::size_t r = 0; r < n_; ++r) clients_[r].rank = r;
    if (server_pid_ > 0) idle_rss_kib_ = status_kib(server_pid_, "VmRSS");

    start_ = Clock::now();
    for (auto& client : clients_) begin_connect(client);
    auto deadline = start_ + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(options_.timeout_s));
    std::vector<epoll_event> events(4096);
    while (done_ < n_) {
      if (Clock::now() > deadline)
        die(fmt::format("timed out after {} s: {} clients connected, {} finished", options_.timeout_s,
                        connected_, done_));
      int ready = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 100);
      if (ready < 0 && errno != EINTR) die(fmt::format("epoll_wait: {}", std::strerror(errno)));
      for (int i = 0; i < ready; ++i)
        handle(clients_[events[static_cast<std::size_t>(i)].data.u64],
               events[static_cast<std::size_t>(i)].events);
    }
    done_at_ = Clock::now();
    report();
    // A reset, not a close: 16,384 sockets in TIME_WAIT would hold their ports into the next run.
    for (auto& client : clients_) {
      linger reset{1, 0};
      ::setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      ::close(client.fd);
    }
  }

 private:
  struct Client {
    std::size_t rank = 0;
    int fd = -1;
    bool connecting = false;
    std::vector<Step> steps;  // filled when the barrier opens
    std::size_t step = 0;
    bool hello_done = false;
    std::string out;
    std::size_t sent = 0;
    std::string in;
    std::size_t checked = 0;  // of the value of the reply arriving, bytes already compared and dropped
    bool want_write = false;
  };

  void begin_connect(Client& client) {
    client.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (client.fd < 0) die(fmt::format("socket() for client {}: {}", client.rank, std::strerror(errno)));
    int one = 1;
    ::setsockopt(client.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (loopback_) {
      // Ranks come from many hosts, each with its own ports. From one, 16,384 connections to one server
      // port fill most of the 28,000 ephemeral ports, and connect() then spends seconds of kernel time
      // searching for a free one: 2,048 clients a source address (127.0.0.2, .3, ...) keep it cheap.
      sockaddr_in source{};
      source.sin_family = AF_INET;
      source.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + static_cast<std::uint32_t>(client.rank / 2048));
      ::setsockopt(client.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
      if (::bind(client.fd, reinterpret_cast<const sockaddr*>(&source), sizeof(source)) != 0)
        die(fmt::format("bind() for client {}: {}", client.rank, std::strerror(errno)));
    }
    int rc = ::connect(client.fd, reinterpret_cast<const sockaddr*>(&address_), sizeof(address_));
    if (rc != 0 && errno != EINPROGRESS)
      die(fmt::format("connect() for client {}: {}", client.rank, std::strerror(errno)));
    client.connecting = true;
    epoll_event event{};
    event.events = EPOLLOUT | EPOLLIN;
    event.data.u64 = client.rank;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, client.fd, &event) != 0)
      die(fmt::format("epoll_ctl: {}", std::strerror(errno)));
    client.want_write = true;
  }

  void watch(Client& client, bool write) {
    if (client.want_write == write) return;
    epoll_event event{};
    event.events = EPOLLIN | (write ? EPOLLOUT : 0u);
    event.data.u64 = client.rank;
    ::epoll_ctl(epoll_, EPOLL_CTL_MOD, client.fd, &event);
    client.want_write = write;
  }

  void handle(Client& client, std::uint32_t events) {
    if (client.connecting) {
      int error = 0;
      socklen_t length = sizeof(error);
      ::getsockopt(client.fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) die(fmt::format("client {} could not connect: {}", client.rank, std::strerror(error)));
      if (!(events & EPOLLOUT)) return;
      client.connecting = false;
      send(client, proto::encode_hello(options_.token));
      return;
    }
    if (events & EPOLLOUT) flush(client);
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) receive(client);
  }

  void send(Client& client, std::string bytes) {
    client.out = std::move(bytes);
    client.sent = 0;
    ++requests_;
    flush(client);
  }

  void flush(Client& client) {
    while (client.sent < client.out.size()) {
      ssize_t n =
          ::send(client.fd, client.out.data() + client.sent, client.out.size() - client.sent, MSG_NOSIGNAL);
      if (n > 0) {
        client.sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return watch(client, true);
      die(fmt::format("client {}: send: {}", client.rank, std::strerror(errno)));
    }
    client.out.clear();
    watch(client, false);
  }

  void receive(Client& client) {
    char buffer[64 * 1024];
    for (;;) {
      ssize_t n = ::recv(client.fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        client.in.append(buffer, static_cast<std::size_t>(n));
        consume(client);
        if (static_cast<std::size_t>(n) < sizeof(buffer)) return;
        continue;
      }
      if (n == 0) die(fmt::format("client {}: the server closed the connection", client.rank));
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      die(fmt::format("client {}: recv: {}", client.rank, std::strerror(errno)));
    }
  }

  // Handles the replies at the front of the client's input, each checked, sending each next request.
  void consume(Client& client) {
    for (;;) {
      const Step* step = nullptr;
      Step hello{"", Reply::Hello, nullptr};
      if (!client.hello_done) {
        step = &hello;
      } else if (client.step < client.steps.size()) {
        step = &client.steps[client.step];
      } else {
        if (!client.in.empty()) die(fmt::format("client {}: bytes after its last reply", client.rank));
        return;
      }
      if (step->reply == Reply::Bytes && client.in.size() >= kReplyHead + 4 &&
          client.in[kReplyHead - 1] == static_cast<char>(proto::Status::Ok)) {
        // A value is checked as it arrives and dropped: the answer every rank reads (100 KB at 16,384
        // ranks) is not held once a client.
        constexpr std::size_t kFront = kReplyHead + 4;  // request id, status, length
        const std::string_view expected = *step->expected;
        const std::size_t length = proto::get_u32(client.in.data() + kReplyHead);
        const std::size_t arrived = std::min(client.in.size() - kFront, length - client.checked);
        if (length != expected.size() ||
            std::string_view(client.in).substr(kFront, arrived) != expected.substr(client.checked, arrived))
          die(fmt::format("client {} step {}: unexpected value", client.rank, client.step));
        client.in.erase(kFront, arrived);
        if (client.in.capacity() > 4096) client.in.shrink_to_fit();  // not 64 KiB a client mid-answer
        client.checked += arrived;
        if (client.checked < length) return;
        client.checked = 0;
        client.in.erase(0, kFront);
      } else {
        std::string failure;
        auto whole = whole_reply(client.in, step->reply, &failure);
        if (!whole) return;
        if (!failure.empty() || !reply_matches(std::string_view(client.in).substr(0, *whole), *step))
          die(fmt::format("client {} step {}: unexpected reply{}", client.rank, client.step,
                          failure.empty() ? "" : ": " + failure));
        client.in.erase(0, *whole);
      }
      if (client.in.empty()) std::string().swap(client.in);
      if (!client.hello_done) {
        client.hello_done = true;
        if (++connected_ == n_) open_barrier();
        continue;
      }
      if (++client.step < client.steps.size()) {
        send(client, client.steps[client.step].request);
      } else {
        ++done_;
      }
    }
  }

  // Every client has said hello: the server holds N idle connections. Measure, then let every client go.
  void open_barrier() {
    connected_at_ = Clock::now();
    if (server_pid_ > 0) {
      connected_rss_kib_ = status_kib(server_pid_, "VmRSS");
      cpu_at_barrier_ = cpu_seconds(server_pid_);
    }
    tcp_pages_connected_ = tcp_memory_pages();
    for (auto& client : clients_) client.steps = script(client.rank);
    for (auto& client : clients_) {
      client.step = 0;
      send(client, client.steps[0].request);
    }
  }

  void report() {
    const std::size_t hellos = n_;
    const std::size_t requests = requests_ - hellos;
    const double connect_s = seconds_between(start_, connected_at_);
    const double requests_s = seconds_between(connected_at_, done_at_);
    fmt::print("# canopy-store-load: {} clients, {} B addresses, a {} B answer read by every rank\n", n_,
               options_.value_bytes, options_.answer_bytes_per_rank * n_);
    fmt::print("connect + hello, all clients:   {:8.3f} s\n", connect_s);
    fmt::print("requests, all clients:          {:8.3f} s  ({} requests, {:.0f} requests/s)\n", requests_s,
               requests, static_cast<double>(requests) / requests_s);
    fmt::print("store requests per rank:        {} (rank 0: {})\n", clients_.back().steps.size(),
               clients_.front().steps.size());
    if (server_pid_ > 0) {
      const long hwm = status_kib(server_pid_, "VmHWM");
      const long end_rss = status_kib(server_pid_, "VmRSS");
      const double cpu = cpu_seconds(server_pid_) - cpu_at_barrier_;
      fmt::print("server CPU during the requests: {:8.3f} s  ({:.1f} us a request)\n", cpu,
                 cpu * 1e6 / static_cast<double>(requests));
      fmt::print("server VmRSS idle:              {:8.1f} MiB\n", idle_rss_kib_ / 1024.0);
      fmt::print("server VmRSS, all connected:    {:8.1f} MiB  ({:.0f} B a connection)\n",
                 connected_rss_kib_ / 1024.0,
                 (connected_rss_kib_ - idle_rss_kib_) * 1024.0 / static_cast<double>(n_));
      fmt::print("server VmRSS at the end:        {:8.1f} MiB\n", end_rss / 1024.0);
      fmt::print("server VmHWM (peak):            {:8.1f} MiB  ({:.0f} B a client above idle)\n",
                 hwm / 1024.0, (hwm - idle_rss_kib_) * 1024.0 / static_cast<double>(n_));
    }
    const long pages = tcp_pages_connected_;
    if (pages >= 0)
      fmt::print(
          "kernel TCP memory, all connected: {:6.1f} MiB  (both ends of every connection, this machine)\n",
          pages * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20));
    fmt::print("load generator VmHWM:           {:8.1f} MiB\n", status_kib(::getpid(), "VmHWM") / 1024.0);
  }

  Options options_;
  std::size_t n_;
  std::shared_ptr<const std::string> answer_;  // rank 0's, as every rank reads it
  std::vector<std::string> keys_;
  std::vector<Client> clients_;
  sockaddr_in address_{};
  bool loopback_ = false;  // the server is on this machine: spread the clients over source addresses
  int epoll_ = -1;
  pid_t server_pid_ = -1;
  std::size_t connected_ = 0, done_ = 0, requests_ = 0;
  Clock::time_point start_, connected_at_, done_at_;
  long idle_rss_kib_ = 0, connected_rss_kib_ = 0, tcp_pages_connected_ = -1;
  double cpu_at_barrier_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"canopy-store-load: a bootstrap of N ranks against one TcpStore server: time and peak memory"};
  app.add_option("--clients", options.clients, "client connections, one a rank")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--value-bytes", options.value_bytes, "bytes of each rank's address")->capture_default_str();
  app.add_option("--answer-bytes-per-rank", options.answer_bytes_per_rank,
                 "bytes a rank of rank 0's answer, which every rank reads (0: no agreement through rank 0)")
      ->capture_default_str();
  app.add_option("--connect", options.connect,
                 "HOST:PORT of a server to load instead of a forked one (IPv4)");
  app.add_option("--token", options.token, "the job token clients present")->capture_default_str();
  app.add_option("--timeout", options.timeout_s, "seconds before the run gives up")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  raise_descriptor_limit(options.clients + 64);
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::optional<ServerProcess> server;
  if (options.connect.empty()) {
    server = ServerProcess::start(options.token, options.clients);
    port = server->port;
  } else {
    auto colon = options.connect.rfind(':');
    if (colon == std::string::npos) die("--connect takes HOST:PORT");
    host = options.connect.substr(0, colon);
    port = static_cast<std::uint16_t>(std::stoul(options.connect.substr(colon + 1)));
  }
  Load load(options);
  load.run(host, port, server ? server->pid : -1);
  if (server) server->stop();
  return 0;
}
