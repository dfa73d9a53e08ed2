#include "tests/support/socket_census.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

namespace canopy::testing {
namespace {

constexpr int kListen = 0x0A;  // the kernel's TCP_LISTEN, as /proc/net/tcp prints it

// The inodes of this process's sockets.
std::set<unsigned long> socket_inodes() {
  std::set<unsigned long> inodes;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    char target[64] = {};
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    std::string_view link(target, n > 0 ? static_cast<std::size_t>(n) : 0);
    if (link.starts_with("socket:[")) inodes.insert(std::stoul(std::string(link.substr(8))));
  }
  closedir(dir);
  return inodes;
}

struct TcpRow {
  int state = 0;
  unsigned remote_port = 0;
};

// Every TCP socket of the host by inode: "sl local rem st queues timer retrnsmt uid timeout inode ...".
std::map<unsigned long, TcpRow> tcp_table() {
  std::map<unsigned long, TcpRow> rows;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
      unsigned long inode = 0;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      TcpRow row;
      row.state = std::stoi(state, nullptr, 16);
      row.remote_port = static_cast<unsigned>(std::stoul(remote.substr(remote.find(':') + 1), nullptr, 16));
      if (inode != 0) rows[inode] = row;
    }
  }
  return rows;
}

}  // namespace

std::string SocketCensus::describe() const {
  return fmt::format("{} sockets: {} listening, {} to the store, {} other TCP connections, {} not TCP",
                     total(), listening, to_store, other_connected, not_tcp);
}

SocketCensus take_socket_census(std::uint16_t store_port) {
  SocketCensus census;
  // The descriptors first: a socket they name is in the kernel's table read after, unless it closed since.
  const std::set<unsigned long> inodes = socket_inodes();
  auto tcp = tcp_table();
  // The kernel prints its table a page at a time, so a read while other processes open and close sockets
  // can skip rows: one missing is looked for again.
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (std::all_of(inodes.begin(), inodes.end(), [&](unsigned long inode) { return tcp.contains(inode); }))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (const auto& [inode, row] : tcp_table()) tcp.insert_or_assign(inode, row);
  }
  for (unsigned long inode : inodes) {
    auto row = tcp.find(inode);
    if (row == tcp.end())
      ++census.not_tcp;
    else if (row->second.state == kListen)
      ++census.listening;
    else if (row->second.remote_port == store_port)
      ++census.to_store;
    else
      ++census.other_connected;
  }
  return census;
}

}  // namespace canopy::testing
