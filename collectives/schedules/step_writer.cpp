#include "collectives/schedules/step_writer.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "common/error.hpp"

namespace canopy::collectives {

Block part_of(std::uint64_t total, int parts, int index) {
  return parts_of(total, parts, index, index + 1);
}

Block parts_of(std::uint64_t total, int parts, int first, int last) {
  const auto n = static_cast<std::uint64_t>(parts);
  const std::uint64_t base = total / n;
  const std::uint64_t extra = total % n;
  auto start = [&](int i) {
    const auto k = static_cast<std::uint64_t>(i);
    return k * base + std::min(k, extra);
  };
  return data_block(start(first), start(last) - start(first));
}

std::uint64_t chunk_total(const Block& block, std::uint64_t chunk_count) {
  return (block.count + chunk_count - 1) / chunk_count;
}

Block chunk_of(const Block& block, std::uint64_t chunk_count, std::uint64_t index) {
  const std::uint64_t begin = std::min(block.count, index * chunk_count);
  const std::uint64_t end = std::min(block.count, begin + chunk_count);
  return Block{block.buffer, block.offset + begin, end - begin};
}

std::map<std::uint64_t, BufferHazards::Segment>::iterator BufferHazards::split(std::uint64_t offset,
                                                                               std::uint64_t end) {
  // Cover [offset, end) with segments (filling holes with untouched ones), cut at both ends.
  auto cut = [this](std::uint64_t at) {
    auto it = segments_.upper_bound(at);
    if (it == segments_.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
      Segment tail = it->second;
      it->second.end = at;
      segments_.emplace(at, std::move(tail));
    }
  };
  cut(offset);
  cut(end);
  std::uint64_t cursor = offset;
  auto it = segments_.lower_bound(offset);
  while (cursor < end) {
    if (it == segments_.end() || it->first > cursor) {
      const std::uint64_t hole_end = it == segments_.end() ? end : std::min(end, it->first);
      it = segments_.emplace_hint(it, cursor, Segment{hole_end, -1, {}});
    }
    cursor = it->second.end;
    ++it;
  }
  return segments_.lower_bound(offset);
}

void BufferHazards::read(std::uint64_t offset, std::uint64_t count, StepIndex step,
                         std::vector<StepIndex>& deps) {
  if (count == 0) return;
  const std::uint64_t end = offset + count;
  for (auto it = split(offset, end); it != segments_.end() && it->first < end; ++it) {
    if (it->second.writer >= 0) deps.push_back(static_cast<StepIndex>(it->second.writer));
    it->second.readers.push_back(step);
  }
}

void BufferHazards::write(std::uint64_t offset, std::uint64_t count, StepIndex step,
                          std::vector<StepIndex>& deps) {
  if (count == 0) return;
  const std::uint64_t end = offset + count;
  for (auto it = split(offset, end); it != segments_.end() && it->first < end; ++it) {
    if (it->second.writer >= 0) deps.push_back(static_cast<StepIndex>(it->second.writer));
    deps.insert(deps.end(), it->second.readers.begin(), it->second.readers.end());
    it->second.writer = step;
    it->second.readers.clear();
  }
}

void WrittenRanges::add(std::uint64_t offset, std::uint64_t count) {
  if (count == 0) return;
  std::uint64_t begin = offset;
  std::uint64_t end = offset + count;
  // Absorb every range that overlaps or touches [begin, end).
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second >= begin) --it;
  while (it != ranges_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(begin, end);
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> WrittenRanges::missing(std::uint64_t offset,
                                                                            std::uint64_t count) const {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;
  const std::uint64_t end = offset + count;
  std::uint64_t cursor = offset;
  auto it = ranges_.upper_bound(offset);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < end && cursor < end; ++it) {
    if (it->second <= cursor) continue;
    if (it->first > cursor) gaps.emplace_back(cursor, it->first - cursor);
    cursor = std::max(cursor, it->second);
  }
  if (cursor < end) gaps.emplace_back(cursor, end - cursor);
  return gaps;
}

StepWriter::StepWriter(const CollectiveCall& call, int staging_slots)
    : call_(call), slot_count_(std::min(call.chunk_count, call.data_count())), staging_slots_(staging_slots) {
  if (call.chunk_count == 0) {
    fail(ErrorCode::InvalidArgument, "{} schedule: chunk_count must be at least 1 element",
         to_string(call.collective));
  }
}

void StepWriter::track(const Block& block, bool writes, StepIndex index, std::vector<StepIndex>& deps) {
  if (block.buffer == Buffer::Input) return;  // read-only: nothing to wait for
  BufferHazards& hazards = block.buffer == Buffer::Data ? data_hazards_ : staging_hazards_;
  if (writes) {
    hazards.write(block.offset, block.count, index, deps);
  } else {
    hazards.read(block.offset, block.count, index, deps);
  }
}

StepIndex StepWriter::add(Step step) {
  const auto index = static_cast<StepIndex>(schedule_.steps.size());
  std::vector<StepIndex>& deps = step.deps;
  switch (step.kind) {
    case StepKind::Send:
      track(step.src, false, index, deps);
      break;
    case StepKind::Recv:
      track(step.dst, true, index, deps);
      break;
    case StepKind::RecvReduce:
      // src is dst itself or read-only Input: tracking dst covers it.
      track(step.staging, true, index, deps);
      track(step.dst, true, index, deps);  // read and written: conflicts like a write
      break;
    case StepKind::Copy:
      track(step.src, false, index, deps);
      track(step.dst, true, index, deps);
      break;
  }
  if (step.kind != StepKind::Send && step.dst.buffer == Buffer::Data)
    written_.add(step.dst.offset, step.dst.count);
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  schedule_.steps.push_back(std::move(step));
  return index;
}

StepIndex StepWriter::send(int peer, Block src, std::uint32_t tag, std::initializer_list<StepIndex> after) {
  Step step;
  step.kind = StepKind::Send;
  step.peer = peer;
  step.src = current(src);
  step.tag = tag;
  step.deps.assign(after.begin(), after.end());
  return add(std::move(step));
}

StepIndex StepWriter::recv(int peer, Block dst, std::uint32_t tag, std::initializer_list<StepIndex> after) {
  Step step;
  step.kind = StepKind::Recv;
  step.peer = peer;
  step.dst = dst;
  step.tag = tag;
  step.deps.assign(after.begin(), after.end());
  return add(std::move(step));
}

StepIndex StepWriter::recv_reduce(int peer, Block dst, std::uint32_t tag, bool incoming_first) {
  if (dst.count > slot_count_) {
    fail(ErrorCode::InvalidArgument,
         "{} schedule (rank {}): a reduced message of {} elements exceeds the staging slot of {} elements",
         to_string(call_.collective), call_.rank, dst.count, slot_count_);
  }
  const std::uint64_t slot = recv_reduces_++ % static_cast<std::uint64_t>(staging_slots_);
  Step step;
  step.kind = StepKind::RecvReduce;
  step.peer = peer;
  step.src = current(dst);
  step.dst = dst;
  step.staging = Block{Buffer::Staging, scratch_end_ + slot * slot_count_, dst.count};
  step.incoming_first = incoming_first;
  step.tag = tag;
  return add(std::move(step));
}

StepIndex StepWriter::copy(Block src, Block dst) {
  Step step;
  step.kind = StepKind::Copy;
  step.src = current(src);
  step.dst = dst;
  return add(std::move(step));
}

Block StepWriter::scratch(std::uint64_t count) {
  // The RecvReduce slots follow the scratch regions, so these come first.
  if (recv_reduces_ > 0)
    fail(ErrorCode::InvalidArgument, "{} schedule (rank {}): scratch() after the first recv_reduce()",
         to_string(call_.collective), call_.rank);
  const Block block{Buffer::Staging, scratch_end_, count};
  scratch_end_ += count;
  return block;
}

Block StepWriter::current(const Block& block) {
  if (call_.in_place || !call_.input_in_data() || block.buffer != Buffer::Data || block.count == 0)
    return block;
  // Only the input region came from the caller; the rest of Data is the same garbage in place or not.
  const std::uint64_t region_begin = call_.input_offset();
  const std::uint64_t region_end = region_begin + call_.input_count();
  const std::uint64_t begin = std::max(block.offset, region_begin);
  const std::uint64_t end = std::min(block.offset + block.count, region_end);
  if (begin >= end) return block;
  const auto gaps = written_.missing(begin, end - begin);
  if (gaps.empty()) return block;
  const bool untouched = begin == block.offset && end == block.offset + block.count && gaps.size() == 1 &&
                         gaps.front().second == block.count;
  if (untouched) return Block{Buffer::Input, block.offset - region_begin, block.count};
  for (const auto& [offset, count] : gaps) copy_input(offset, count);
  return block;
}

void StepWriter::copy_input(std::uint64_t offset, std::uint64_t count) {
  Step step;
  step.kind = StepKind::Copy;
  step.src = Block{Buffer::Input, offset - call_.input_offset(), count};
  step.dst = data_block(offset, count);
  add(std::move(step));
}

void StepWriter::copy_unwritten_result() {
  if (!call_.input_in_data()) return;  // the builder reads Input itself
  std::uint64_t begin = call_.input_offset();
  std::uint64_t count = call_.input_count();
  if (call_.collective == Collective::Reduce && call_.rank != call_.root) return;  // no result here
  if (call_.collective == Collective::ReduceScatter) {
    begin = static_cast<std::uint64_t>(call_.rank) * call_.count;  // only this rank's block is its result
    count = call_.count;
  }
  for (const auto& [offset, gap] : written_.missing(begin, count)) copy_input(offset, gap);
}

void StepWriter::send_chunks(int peer, Block src, std::uint32_t round) {
  const std::uint64_t chunks = chunk_total(src, call_.chunk_count);
  for (std::uint64_t c = 0; c < chunks; ++c)
    send(peer, chunk_of(src, call_.chunk_count, c), message_tag(round, c));
}

void StepWriter::recv_chunks(int peer, Block dst, std::uint32_t round) {
  const std::uint64_t chunks = chunk_total(dst, call_.chunk_count);
  for (std::uint64_t c = 0; c < chunks; ++c)
    recv(peer, chunk_of(dst, call_.chunk_count, c), message_tag(round, c));
}

void StepWriter::recv_reduce_chunks(int peer, Block dst, std::uint32_t round, bool incoming_first) {
  const std::uint64_t chunks = chunk_total(dst, call_.chunk_count);
  for (std::uint64_t c = 0; c < chunks; ++c) {
    recv_reduce(peer, chunk_of(dst, call_.chunk_count, c), message_tag(round, c), incoming_first);
  }
}

void StepWriter::exchange_chunks(int to, Block out, int from, Block in, std::uint32_t round,
                                 std::uint64_t first_chunk) {
  const std::uint64_t out_chunks = chunk_total(out, call_.chunk_count);
  const std::uint64_t in_chunks = chunk_total(in, call_.chunk_count);
  for (std::uint64_t c = 0; c < std::max(out_chunks, in_chunks); ++c) {
    const std::uint32_t tag = message_tag(round, first_chunk + c);
    if (c < out_chunks) send(to, chunk_of(out, call_.chunk_count, c), tag);
    if (c < in_chunks) recv(from, chunk_of(in, call_.chunk_count, c), tag);
  }
}

void StepWriter::exchange_reduce_chunks(int to, Block out, int from, Block in, std::uint32_t round,
                                        bool incoming_first, std::uint64_t first_chunk) {
  const std::uint64_t out_chunks = chunk_total(out, call_.chunk_count);
  const std::uint64_t in_chunks = chunk_total(in, call_.chunk_count);
  for (std::uint64_t c = 0; c < std::max(out_chunks, in_chunks); ++c) {
    const std::uint32_t tag = message_tag(round, first_chunk + c);
    if (c < out_chunks) send(to, chunk_of(out, call_.chunk_count, c), tag);
    if (c < in_chunks) recv_reduce(from, chunk_of(in, call_.chunk_count, c), tag, incoming_first);
  }
}

Schedule StepWriter::finish() && {
  if (!call_.in_place) copy_unwritten_result();
  const std::uint64_t slots_used = std::min(recv_reduces_, static_cast<std::uint64_t>(staging_slots_));
  schedule_.staging_count = scratch_end_ + slots_used * slot_count_;
  return std::move(schedule_);
}

}  // namespace canopy::collectives
