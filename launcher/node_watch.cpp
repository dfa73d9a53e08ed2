#include "launcher/node_watch.hpp"

#include <fmt/format.h>

#include <exception>

#include "common/log.hpp"
#include "launcher/node_census.hpp"

namespace canopy::launcher {
namespace {

// How often the nodes are counted: a lost node is noticed within its record's TTL and this.
constexpr auto kInterval = std::chrono::seconds(1);

}  // namespace

NodeWatch::NodeWatch(std::shared_ptr<Store> store, ElasticRange nodes)
    : store_(std::move(store)), nodes_(nodes), thread_([this] { watch_until_stopped(); }) {}

NodeWatch::~NodeWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_all();
  thread_.join();
}

JobNews NodeWatch::take() {
  std::lock_guard lock(mutex_);
  JobNews news = std::move(news_);
  news_ = {};
  return news;
}

void NodeWatch::watch_until_stopped() {
  NodeCensus census(store_);
  std::unique_lock lock(mutex_);
  while (!stopping_ && !verdict_) {
    lock.unlock();
    std::vector<std::string> lines;
    std::string stop_because;
    try {
      const NodeCensus::Count count = census.count();
      const std::size_t left = count.live.size();
      const bool too_few = left < static_cast<std::size_t>(nodes_.min);
      finished_ = finished_ || store_->check({node_keys::kFinished});
      if (too_few && !finished_) {
        // One line says it all: who went, who is left, and what this node does about it.
        stop_because =
            fmt::format("{}{} left ({}), fewer than the {} of --nnodes {}: stopping this node's ranks",
                        count.newly_gone.empty() ? "" : describe_nodes(count.newly_gone) + " gone; ",
                        nodes_text(left), describe_nodes(count.live), nodes_.min, nodes_.text());
      } else if (!finished_) {  // once the job is finishing, nodes end: that is no news
        for (const NodeRecord& node : count.newly_gone)
          lines.push_back(fmt::format("{} is gone (its launcher's record expired or was removed); {} left",
                                      node.describe(), nodes_text(left)));
      }
      store_failing_ = false;
    } catch (const std::exception& e) {
      // A store that cannot be read judges no node: the ranks go on, and the count resumes when it answers.
      if (!store_failing_) log::warn("canopy-run: cannot count the job's nodes in the store: {}", e.what());
      store_failing_ = true;
    }
    lock.lock();
    news_.job_finished = finished_;
    for (std::string& line : lines) news_.lines.push_back(std::move(line));
    if (!stop_because.empty()) {
      news_.stop_because = std::move(stop_because);
      verdict_ = true;
      break;
    }
    stop_requested_.wait_for(lock, kInterval, [this] { return stopping_; });
  }
}

}  // namespace canopy::launcher
