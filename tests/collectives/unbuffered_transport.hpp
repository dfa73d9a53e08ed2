// A transport with no buffering at all, for ranks that are threads of one test: a send completes only
// when the receiver has posted the matching receive (MPI's synchronous mode). A schedule that relies on
// the network holding its messages — two ranks sending to each other before either receives — deadlocks
// here at once, where over real TCP it would only deadlock once messages outgrow the socket buffers.
#pragma once

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/error.hpp"
#include "transport/transport.hpp"

namespace canopy::testing {

class UnbufferedHub {
 public:
  struct Pending {
    transport::OpId id;
    transport::Envelope envelope;
    std::span<const std::byte> payload;  // sends
    std::span<std::byte> destination;    // receives
  };

  explicit UnbufferedHub(int size) : size_(size), completed_(size) {}

  int size() const { return size_; }

  transport::OpId post(int from, int to, bool is_send, const transport::Envelope& envelope,
                       std::span<const std::byte> payload, std::span<std::byte> destination) {
    std::lock_guard lock(mutex_);
    transport::OpId id = next_id_++;
    auto& queue = is_send ? sends_[{from, to}] : receives_[{from, to}];
    queue.push_back({id, envelope, payload, destination});
    match(from, to);
    return id;
  }

  bool wait(int rank, Deadline deadline, std::vector<transport::OpId>& completed) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_until(lock, deadline.at(), [&] { return !completed_[rank].empty(); })) return false;
    completed.insert(completed.end(), completed_[rank].begin(), completed_[rank].end());
    completed_[rank].clear();
    return true;
  }

 private:
  // Pairs the oldest send from `from` to `to` with the oldest receive posted by `to` from `from`.
  void match(int a, int b) {
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      auto& sends = sends_[{from, to}];
      auto& receives = receives_[{from, to}];
      while (!sends.empty() && !receives.empty()) {
        Pending send = sends.front();
        Pending receive = receives.front();
        sends.pop_front();
        receives.pop_front();
        if (!(send.envelope == receive.envelope) || send.payload.size() != receive.destination.size())
          fail(ErrorCode::Mismatch, "rank {} sent {} ({} B), rank {} expected {} ({} B)", from,
               transport::describe(send.envelope), send.payload.size(), to, transport::describe(receive.envelope),
               receive.destination.size());
        if (!send.payload.empty()) std::memcpy(receive.destination.data(), send.payload.data(), send.payload.size());
        completed_[from].push_back(send.id);
        completed_[to].push_back(receive.id);
        changed_.notify_all();
      }
    }
  }

  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  transport::OpId next_id_ = 1;
  // Keyed by (sender, receiver): sends posted by the sender, receives posted by the receiver.
  std::map<std::pair<int, int>, std::deque<Pending>> sends_, receives_;
  std::vector<std::vector<transport::OpId>> completed_;
};

class UnbufferedTransport final : public transport::Transport {
 public:
  UnbufferedTransport(std::shared_ptr<UnbufferedHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  std::string_view name() const override { return "unbuffered"; }
  transport::OpId post_send(int peer, const transport::Envelope& envelope,
                            std::span<const std::byte> payload) override {
    return hub_->post(rank_, peer, true, envelope, payload, {});
  }
  transport::OpId post_recv(int peer, const transport::Envelope& envelope, std::span<std::byte> destination) override {
    return hub_->post(peer, rank_, false, envelope, {}, destination);
  }
  bool progress(Deadline deadline, std::vector<transport::OpId>& completed) override {
    return hub_->wait(rank_, deadline, completed);
  }
  void abort(const std::string&) override {}
  void wake() override {}

 private:
  std::shared_ptr<UnbufferedHub> hub_;
  int rank_;
};

}  // namespace canopy::testing
