// While the ranks run, a thread of canopy-run counts the job's live nodes once a second (node_census.hpp)
// and says what changed: a node gone (its launcher's record expired or was removed) and, once fewer than
// --nnodes MIN are left and no node has finished, that this node must stop its ranks. The ranks recover
// from a lost node themselves (they shrink); this only decides when the job as a whole is over.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "canopy/store.hpp"
#include "common/elastic_range.hpp"

namespace canopy::launcher {

// What the watch has to say since it was last asked.
struct JobNews {
  std::vector<std::string> lines;  // for canopy-run's stderr, one a change
  std::string stop_because;        // non-empty once: too few nodes are left, stop this node's ranks
  bool job_finished = false;       // a node's ranks have all finished: the job is ending
};

class NodeWatch {
 public:
  // `store`: a handle of its own on the job's store, its calls bounded; `nodes`: --nnodes MIN:MAX.
  NodeWatch(std::shared_ptr<Store> store, ElasticRange nodes);
  ~NodeWatch();  // stops the thread
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

  JobNews take();

 private:
  void watch_until_stopped();

  std::shared_ptr<Store> store_;
  ElasticRange nodes_;
  std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;
  JobNews news_;          // under mutex_
  bool verdict_ = false;  // the stop was said: nothing more to watch
  bool store_failing_ = false;
  bool finished_ = false;  // seen canopy-run/finished: it stays
  std::thread thread_;
};

}  // namespace canopy::launcher
