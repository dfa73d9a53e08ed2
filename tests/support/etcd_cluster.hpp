// Real etcd members for a test: 1 or 3 of them on free loopback ports, as one cluster, each with its data
// directory in a temporary folder and its log beside it; killed (and the folder removed) at the end.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::testing {

// True when the etcd server binary (Debian's etcd-server) is installed, so that tests can skip otherwise.
bool etcd_installed();

class EtcdCluster {
 public:
  // Starts `members` members and waits until each serves clients (with other ports, up to 5 times, when
  // another process takes a chosen port first). Elections are tuned for tests on
  // loopback (heartbeat 50 ms, election timeout 300 ms): a killed leader is replaced within about a second.
  // Call from the thread that stops the cluster: the members die with that thread (PR_SET_PDEATHSIG).
  explicit EtcdCluster(int members, std::chrono::milliseconds start_limit = std::chrono::seconds(30));
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:<client port>" of member i.
  std::string member(int i) const;
  // etcd://<every member, `first` first>/<prefix>
  std::string address(const std::string& prefix, int first = 0) const;
  // The member that leads now (asked of the members that are running).
  int leader() const;
  // SIGKILL, and waits until it is gone.
  void kill(int i);
  // Starts killed member i again from its data directory, and waits until it serves clients (a member of
  // three says so once a majority is up and has a leader).
  void restart(int i, std::chrono::milliseconds limit = std::chrono::seconds(30));
  // What member i wrote to its log, for failure messages.
  std::string log_of(int i) const;

 private:
  struct Member {
    std::string name;
    std::string directory;  // its data; its log is "<directory>.log"
    int client_port = 0, peer_port = 0;
    pid_t pid = -1;
  };
  // false when a member found a chosen port taken (then the caller tries again with other ports)
  bool try_start(int members, int attempt, Deadline deadline);
  void start(Member& member);
  // false when it found a chosen port taken; throws when it exited otherwise or the deadline passed
  bool wait_until_serving(int i, Deadline deadline);

  pid_t owner_ = ::getpid();
  TempDir dir_;
  std::vector<Member> members_;
  std::string initial_cluster_;  // name=peer URL of every member
};

}  // namespace canopy::testing
