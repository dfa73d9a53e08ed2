#include "tests/support/etcd_cluster.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

#include "common/deadline.hpp"
#include "rendezvous/etcd_client.hpp"
#include "tests/support/child_process.hpp"

namespace canopy::testing {
namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

// Loopback ports nothing listens on now, all different: each is held until all are chosen (etcd binds them a
// moment later; another process may take one in between, which the caller retries).
std::vector<int> free_loopback_ports(int count) {
  std::vector<int> sockets, ports;
  for (int i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      throw std::runtime_error("EtcdCluster: cannot find a free loopback port");
    sockets.push_back(fd);
    ports.push_back(ntohs(address.sin_port));
  }
  for (int fd : sockets) ::close(fd);
  return ports;
}

constexpr int kStartAttempts = 5;

}  // namespace

bool etcd_installed() {
  return ::access(kEtcd, X_OK) == 0;
}

EtcdCluster::EtcdCluster(int members, std::chrono::milliseconds start_limit) {
  if (members != 1 && members != 3) throw std::invalid_argument("EtcdCluster: 1 or 3 members");
  const Deadline deadline = Deadline::after(start_limit);
  for (int attempt = 1;; ++attempt) {
    if (try_start(members, attempt, deadline)) return;
    if (attempt == kStartAttempts)
      throw std::runtime_error(
          fmt::format("etcd: every port chosen in {} attempts was taken", kStartAttempts));
  }
}

bool EtcdCluster::try_start(int members, int attempt, Deadline deadline) {
  for (int i = 0; i < size(); ++i) kill(i);
  members_.clear();
  const std::vector<int> ports = free_loopback_ports(2 * members);
  initial_cluster_.clear();
  for (int i = 0; i < members; ++i) {
    Member member;
    member.name = fmt::format("m{}", i);
    member.directory = fmt::format("{}/attempt{}-{}", dir_.path(), attempt, member.name);
    member.client_port = ports[static_cast<std::size_t>(2 * i)];
    member.peer_port = ports[static_cast<std::size_t>(2 * i + 1)];
    initial_cluster_ += fmt::format("{}{}=http://127.0.0.1:{}", i ? "," : "", member.name, member.peer_port);
    members_.push_back(member);
  }
  for (auto& member : members_) start(member);
  for (int i = 0; i < size(); ++i)
    if (!wait_until_serving(i, deadline)) return false;
  return true;
}

// Serving clients once it logs so: a member of three says it after the cluster has elected a leader.
bool EtcdCluster::wait_until_serving(int i, Deadline deadline) {
  auto& member = members_.at(static_cast<std::size_t>(i));
  while (count_of(log_of(i), "ready to serve client requests") == 0) {
    int status = 0;
    if (::waitpid(member.pid, &status, WNOHANG) == member.pid) {
      member.pid = -1;
      if (count_of(log_of(i), "address already in use") > 0) return false;  // another process took a port
      throw std::runtime_error(fmt::format("etcd member {} exited while starting:\n{}", i, log_of(i)));
    }
    if (deadline.expired())
      throw std::runtime_error(fmt::format("etcd member {} did not start in time:\n{}", i, log_of(i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void EtcdCluster::restart(int i, std::chrono::milliseconds limit) {
  auto& member = members_.at(static_cast<std::size_t>(i));
  if (member.pid >= 0) throw std::logic_error("EtcdCluster::restart: the member is running");
  start(member);  // its data directory holds the cluster's: the --initial-* flags are ignored
  if (!wait_until_serving(i, Deadline::after(limit)))
    throw std::runtime_error(fmt::format("etcd member {} found its port taken on restart:\n{}", i, log_of(i)));
}

void EtcdCluster::start(Member& member) {
  std::vector<std::string> args = {
      kEtcd,
      "--name=" + member.name,
      "--data-dir=" + member.directory,
      fmt::format("--listen-client-urls=http://127.0.0.1:{}", member.client_port),
      fmt::format("--advertise-client-urls=http://127.0.0.1:{}", member.client_port),
      fmt::format("--listen-peer-urls=http://127.0.0.1:{}", member.peer_port),
      fmt::format("--initial-advertise-peer-urls=http://127.0.0.1:{}", member.peer_port),
      "--initial-cluster=" + initial_cluster_,
      "--initial-cluster-token=" + dir_.path(),  // unique: members of another test's cluster never join
      "--initial-cluster-state=new",
      "--heartbeat-interval=50",
      "--election-timeout=300",
  };
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string log = member.directory + ".log";
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("EtcdCluster: fork failed");
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: the test may have threads.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = ::open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0) ::_exit(127);
    ::dup2(null, STDIN_FILENO);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(kEtcd, argv.data());
    ::_exit(127);
  }
  member.pid = pid;
}

EtcdCluster::~EtcdCluster() {
  if (::getpid() != owner_) return;  // a forked rank that inherited the cluster leaves it to the test
  for (int i = 0; i < size(); ++i) kill(i);
}

std::string EtcdCluster::member(int i) const {
  return fmt::format("127.0.0.1:{}", members_.at(static_cast<std::size_t>(i)).client_port);
}

std::string EtcdCluster::address(const std::string& prefix, int first) const {
  std::string members;
  for (int k = 0; k < size(); ++k) members += (k ? "," : "") + member((first + k) % size());
  return fmt::format("etcd://{}/{}", members, prefix);
}

int EtcdCluster::leader() const {
  // Member ids are unsigned 64-bit numbers, written as strings: compared as such.
  auto status_of = [&](int i) {
    rendezvous::EtcdClient client(rendezvous::parse_etcd_address(fmt::format("etcd://{}/status", member(i))));
    return client.call("/v3/maintenance/status", nlohmann::json::object(),
                       Deadline::after(std::chrono::seconds(2)), "status");
  };
  for (int i = 0; i < size(); ++i) {
    if (members_[static_cast<std::size_t>(i)].pid < 0) continue;
    const std::string leader_id = status_of(i).value("leader", std::string());
    for (int k = 0; k < size(); ++k) {
      if (members_[static_cast<std::size_t>(k)].pid < 0) continue;
      if (status_of(k)["header"].value("member_id", std::string()) == leader_id) return k;
    }
  }
  throw std::runtime_error("EtcdCluster: no running member names a leader");
}

void EtcdCluster::kill(int i) {
  auto& member = members_.at(static_cast<std::size_t>(i));
  if (member.pid < 0) return;
  ::kill(member.pid, SIGKILL);
  ::waitpid(member.pid, nullptr, 0);
  member.pid = -1;
}

std::string EtcdCluster::log_of(int i) const {
  return read_file(members_.at(static_cast<std::size_t>(i)).directory + ".log");
}

}  // namespace canopy::testing
