// A FIFO on a power-of-two ring that only allocates when it grows past its largest size so far: the
// per-peer operation queues must not touch the heap for every message in steady state (std::deque
// allocates and frees a block every few hundred pushes). Its first slots come with its first push: a rank
// holds these queues for every peer of its group, and most peers of a large group never see a message
// (each fresh page costs a page fault at start-up: docs/PERFORMANCE.md, *Start-up and scale*).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace canopy::transport {

template <typename T>
class RingQueue {
 public:
  explicit RingQueue(std::size_t initial_capacity = 16) : initial_capacity_(round_up(initial_capacity)) {}

  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  std::size_t capacity() const { return slots_.size(); }  // 0 until the first push
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }

  void push_back(T value) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = std::move(value);
    ++count_;
  }
  void pop_front() {
    slots_[head_] = T{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }
  void clear() {
    while (!empty()) pop_front();
  }

 private:
  static std::size_t round_up(std::size_t n) {
    std::size_t capacity = 1;
    while (capacity < n) capacity *= 2;
    return capacity;
  }
  void grow() {
    std::vector<T> bigger(slots_.empty() ? initial_capacity_ : slots_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::size_t initial_capacity_;
  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace canopy::transport
