// canopy-run's torchrun-shaped node rendezvous flags (docs/LAUNCHER.md, "Elastic across nodes"):
// --nnodes N or MIN:MAX, --rdzv-backend etcd|c10d, --rdzv-endpoint HOST:PORT[,HOST:PORT...], --rdzv-id JOB
// and --rdzv-conf KEY=VALUE[,...]; what each flag's text means, apart from how they combine
// (launch_options.cpp checks that).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/elastic_range.hpp"

namespace canopy::launcher {

// Where the launchers meet: static (--node-rank and --master-addr, node 0 hosts a TcpStore), c10d (the
// same TcpStore, on the endpoint's host, which is node 0), or etcd (an etcd cluster; no node is special).
enum class RdzvBackend { Static, C10d, Etcd };

struct RdzvOptions {
  RdzvBackend backend = RdzvBackend::Static;
  std::vector<std::string> endpoints;  // "host:port", as given in --rdzv-endpoint
  std::string id;                      // --rdzv-id: the job's name in the store
  ElasticRange nodes{1, 1};            // --nnodes: the fewest nodes the job runs with, and the most
  // --rdzv-conf: how long the first MIN nodes wait for each other; once MIN are there, how long they wait
  // for more (up to MAX) before they fix the members; and how long a dead launcher's record outlives it.
  std::chrono::milliseconds join_timeout = std::chrono::seconds(600);
  std::chrono::milliseconds last_call = std::chrono::seconds(1);
  std::chrono::milliseconds node_ttl = std::chrono::seconds(5);

  bool elastic_nodes() const { return backend == RdzvBackend::Etcd; }
};

// "N" (N:N) or "MIN:MAX" nodes, 1 <= MIN <= MAX <= 65536. Throws Error(Config) naming --nnodes.
ElasticRange parse_node_range(std::string_view text);

// "etcd", "c10d" (torchrun's names; "static" too). Throws Error(Config).
RdzvBackend parse_rdzv_backend(std::string_view text);

// "host:port,host:port" (IPv6 as [::1]:2379): the list, each checked for a host and a port 1-65535.
std::vector<std::string> parse_rdzv_endpoints(std::string_view text);

// A job id that can name an etcd prefix: letters, digits, '.', '_' and '-', 1 to 128 of them.
void check_rdzv_id(std::string_view id);

// "join_timeout=600,last_call_timeout=1,node_ttl=5" (seconds, or with ms/s) into `options`; an unknown
// key or a bad value is an Error(Config) naming it.
void apply_rdzv_conf(std::string_view text, RdzvOptions& options);

// The etcd store address of the job: etcd://<endpoints>/canopy-run/<id>.
std::string etcd_job_address(const RdzvOptions& options);

}  // namespace canopy::launcher
