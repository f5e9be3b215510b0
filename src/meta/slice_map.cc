#include "meta/slice_map.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace tierfs {

namespace {

// The part of `seg` that lies in [start, end), which must overlap it.
ChunkSegment Clip(const ChunkSegment& seg, uint64_t start, uint64_t end) {
  uint64_t s = std::max<uint64_t>(seg.pos, start);
  uint64_t e = std::min<uint64_t>(static_cast<uint64_t>(seg.pos) + seg.len, end);
  ChunkSegment out = seg;
  out.pos = static_cast<uint32_t>(s);
  out.len = static_cast<uint32_t>(e - s);
  out.off = seg.off + static_cast<uint32_t>(s - seg.pos);
  return out;
}

}  // namespace

std::vector<ChunkSegment> BuildSliceMap(std::vector<SliceRecord> records) {
  std::stable_sort(records.begin(), records.end(),
                   [](const SliceRecord& a, const SliceRecord& b) { return a.seq < b.seq; });
  // Keyed by pos; the values never overlap. Each record inserts at most three entries and
  // erases the ones it covers, so the total work is O(n log n).
  std::map<uint32_t, ChunkSegment> map;
  for (const SliceRecord& r : records) {
    uint64_t start = r.pos;
    uint64_t end = std::min<uint64_t>(start + r.len, kChunkSize);
    if (start >= end) continue;
    // First segment that may overlap: the one starting before `start`, if it reaches in.
    auto it = map.lower_bound(static_cast<uint32_t>(start));
    if (it != map.begin()) {
      auto prev = std::prev(it);
      if (static_cast<uint64_t>(prev->second.pos) + prev->second.len > start) it = prev;
    }
    while (it != map.end() && it->second.pos < end) {
      ChunkSegment old = it->second;
      it = map.erase(it);
      uint64_t old_end = static_cast<uint64_t>(old.pos) + old.len;
      if (old.pos < start) map.emplace(old.pos, Clip(old, old.pos, start));
      if (old_end > end) it = map.emplace(static_cast<uint32_t>(end), Clip(old, end, old_end)).first;
    }
    map.emplace(static_cast<uint32_t>(start),
                ChunkSegment{static_cast<uint32_t>(start), static_cast<uint32_t>(end - start), r.id, r.size, r.off,
                             r.pack, r.pack_len, r.pack_off, r.flags});
  }
  std::vector<ChunkSegment> out;
  out.reserve(map.size());
  for (auto& [pos, seg] : map) out.push_back(seg);
  return out;
}

std::vector<ChunkSegment> Slice(const std::vector<ChunkSegment>& segments, uint32_t pos, uint32_t len) {
  std::vector<ChunkSegment> out;
  uint64_t start = pos;
  uint64_t end = start + len;
  if (len == 0) return out;
  // First segment that ends after `start`: segments are sorted and disjoint, so ends are
  // sorted too.
  auto it = std::partition_point(segments.begin(), segments.end(), [&](const ChunkSegment& s) {
    return static_cast<uint64_t>(s.pos) + s.len <= start;
  });
  for (; it != segments.end() && it->pos < end; ++it) {
    if (it->len == 0) continue;
    out.push_back(Clip(*it, start, end));
  }
  return out;
}

uint64_t AllocatedBytes(const std::vector<ChunkSegment>& segments, uint32_t pos, uint32_t len) {
  uint64_t n = 0;
  for (const ChunkSegment& s : Slice(segments, pos, len)) {
    if (IsAllocated(s)) n += s.len;
  }
  return n;
}

std::vector<std::pair<uint32_t, uint32_t>> Unallocated(const std::vector<ChunkSegment>& segments, uint32_t pos,
                                                       uint32_t end) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  auto add = [&](uint32_t a, uint32_t b) {
    if (a >= b) return;
    if (!out.empty() && out.back().second == a) out.back().second = b;
    else out.emplace_back(a, b);
  };
  uint32_t at = pos;
  for (const ChunkSegment& s : Slice(segments, pos, end > pos ? end - pos : 0)) {
    add(at, s.pos);
    if (!IsAllocated(s)) add(s.pos, s.pos + s.len);
    at = s.pos + s.len;
  }
  add(at, end);
  return out;
}

uint64_t NextData(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, bool want_data) {
  if (pos >= end) return end;
  for (const ChunkSegment& s : Slice(segments, static_cast<uint32_t>(pos), static_cast<uint32_t>(end - pos))) {
    bool data = s.id != 0;
    if (want_data && data) return s.pos;
    if (!want_data && (s.pos > pos || !data)) return pos;  // a gap, or a hole segment
    pos = static_cast<uint64_t>(s.pos) + s.len;
  }
  return want_data ? end : pos;
}

namespace {
uint64_t Down(uint64_t x, uint64_t unit) { return x / unit * unit; }
uint64_t Up(uint64_t x, uint64_t unit) { return (x + unit - 1) / unit * unit; }
}  // namespace

uint64_t NextDataBlock(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, bool want_data,
                       uint64_t unit) {
  if (pos >= end) return end;
  if (want_data) {
    // The block of the first data byte from pos's block on; pos itself if that is its block.
    uint64_t d = NextData(segments, Down(pos, unit), end, true);
    return d >= end ? end : std::max(pos, Down(d, unit));
  }
  // The first block from pos's on without a data byte (the last one may be cut by end).
  for (uint64_t b = Down(pos, unit); b < end;) {
    uint64_t bend = std::min(b + unit, end);
    if (NextData(segments, b, bend, true) >= bend) return std::max(pos, b);
    // Data in block b: skip the data run that follows it; the block holding its end has data too.
    uint64_t h = NextData(segments, bend, end, false);
    if (h >= end) return end;
    b = Up(h, unit);
  }
  return end;
}

uint64_t AllocatedBlocks(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, uint64_t unit) {
  uint64_t n = 0;
  uint64_t next = 0;  // blocks below this one are counted
  if (pos >= end) return 0;
  for (const ChunkSegment& s : Slice(segments, static_cast<uint32_t>(pos), static_cast<uint32_t>(end - pos))) {
    if (!IsAllocated(s) || s.len == 0) continue;
    uint64_t first = std::max(next, Down(s.pos, unit));
    uint64_t last = Up(static_cast<uint64_t>(s.pos) + s.len, unit);
    if (last > first) {
      n += (last - first) / unit;
      next = last;
    }
  }
  return n;
}

uint64_t BlocksFreedByPunch(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, uint64_t unit) {
  if (pos >= end) return 0;
  uint64_t n = AllocatedBlocks(segments, pos, end, unit);
  auto allocated = [&](uint64_t a, uint64_t b) {
    return a < b && AllocatedBytes(segments, static_cast<uint32_t>(a), static_cast<uint32_t>(b - a)) > 0;
  };
  // An edge block keeps counting when it holds allocated bytes outside the punched range.
  const uint64_t left = Down(pos, unit), right = Down(end - 1, unit);
  if (allocated(std::max(pos, left), std::min(end, left + unit)) &&
      (allocated(left, pos) || (left == right && allocated(end, left + unit)))) {
    n--;
  }
  if (right != left && allocated(right, end) && allocated(end, right + unit)) n--;
  return n;
}

}  // namespace tierfs
