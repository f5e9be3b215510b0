#include "chunk/s3fifo.h"

#include <algorithm>

namespace tierfs {

namespace {
// A cache always gets a few ghosts, however few blocks its main queue holds.
constexpr size_t kMinGhosts = 64;
}  // namespace

bool S3Fifo::Touch(uint64_t key, uint32_t now_ms) {
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return false;
  Node& n = it->second;
  if (correlated_ms_ != 0 && now_ms - n.touched_ms < correlated_ms_) return true;
  n.touched_ms = now_ms;
  if (n.freq < 3) ++n.freq;
  return true;
}

uint64_t S3Fifo::SizeOf(uint64_t key) const {
  auto it = nodes_.find(key);
  return it == nodes_.end() ? 0 : it->second.size();
}

void S3Fifo::Push(uint64_t key, Node& n, Queue q) {
  n.queue = q;
  n.stamp = ++next_stamp_;
  if (q == kSmall) {
    small_.emplace_back(key, n.stamp);
    small_bytes_ += n.size();
  } else {
    main_.emplace_back(key, n.stamp);
    main_bytes_ += n.size();
    ++main_count_;
  }
}

void S3Fifo::Unlink(uint64_t key, Node& n) {
  // The queue entry goes stale (its stamp no longer matches) and is skipped when reached.
  if (n.queue == kSmall) {
    small_bytes_ -= n.size();
  } else {
    main_bytes_ -= n.size();
    --main_count_;
  }
  (void)key;
}

bool S3Fifo::Insert(uint64_t key, uint64_t size, std::vector<uint64_t>* evicted, uint32_t now_ms) {
  Erase(key);
  if (size > capacity_) return false;
  Node n{};
  n.touched_ms = now_ms;
  n.size_lo = static_cast<uint32_t>(size);
  n.size_hi = static_cast<uint16_t>(size >> 32);
  auto g = ghosts_.find(key);
  bool was_ghost = g != ghosts_.end();
  if (was_ghost) ghosts_.erase(g);
  auto [it, _] = nodes_.emplace(key, n);
  Push(key, it->second, was_ghost ? kMain : kSmall);
  Trim(capacity_, evicted);
  return nodes_.count(key) != 0;
}

void S3Fifo::Restore(uint64_t key, uint64_t size) {
  Erase(key);
  Node n{};
  n.size_lo = static_cast<uint32_t>(size);
  n.size_hi = static_cast<uint16_t>(size >> 32);
  auto [it, _] = nodes_.emplace(key, n);
  Push(key, it->second, kMain);
}

bool S3Fifo::Erase(uint64_t key) {
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return false;
  Unlink(key, it->second);
  nodes_.erase(it);
  return true;
}

void S3Fifo::Trim(uint64_t target, std::vector<uint64_t>* evicted) {
  while (bytes() > target && !nodes_.empty()) EvictOne(evicted);
  // Stale entries of erased blocks would otherwise pile up in a cache that never fills.
  if (small_.size() + main_.size() > 2 * nodes_.size() + 1024) {
    auto compact = [&](Fifo& q) {
      Fifo keep;
      for (const auto& e : q) {
        auto it = nodes_.find(e.first);
        if (it != nodes_.end() && it->second.stamp == e.second) keep.push_back(e);
      }
      q.swap(keep);
    };
    compact(small_);
    compact(main_);
  }
}

S3Fifo::Node* S3Fifo::Oldest(Fifo& q, uint64_t* key) {
  while (!q.empty()) {
    auto [k, stamp] = q.front();
    auto it = nodes_.find(k);
    if (it != nodes_.end() && it->second.stamp == stamp) {
      *key = k;
      return &it->second;
    }
    q.pop_front();
  }
  return nullptr;
}

void S3Fifo::EvictOne(std::vector<uint64_t>* evicted) {
  uint64_t key = 0;
  // Evict from the small queue while it holds more than its tenth, or when the main queue
  // is empty.
  bool from_small = small_bytes_ > capacity_ / 10 || main_bytes_ == 0;
  if (from_small) {
    Node* n = Oldest(small_, &key);
    if (n) {
      small_.pop_front();
      small_bytes_ -= n->size();
      if (n->freq > 0) {
        n->freq = 0;
        Push(key, *n, kMain);
        return;
      }
      nodes_.erase(key);
      RememberGhost(key);
      if (evicted) evicted->push_back(key);
      return;
    }
  }
  for (;;) {
    Node* n = Oldest(main_, &key);
    if (!n) return;
    main_.pop_front();
    main_bytes_ -= n->size();
    --main_count_;
    if (n->freq > 0) {
      --n->freq;
      Push(key, *n, kMain);
      continue;
    }
    nodes_.erase(key);
    if (evicted) evicted->push_back(key);
    return;
  }
}

void S3Fifo::RememberGhost(uint64_t key) {
  uint32_t stamp = ++next_stamp_;
  ghosts_[key] = stamp;
  ghost_fifo_.emplace_back(key, stamp);
  size_t limit = std::max(kMinGhosts, main_count_);
  while (ghosts_.size() > limit && !ghost_fifo_.empty()) {
    auto [k, s] = ghost_fifo_.front();
    ghost_fifo_.pop_front();
    auto it = ghosts_.find(k);
    if (it != ghosts_.end() && it->second == s) ghosts_.erase(it);
  }
  while (ghost_fifo_.size() > 2 * limit + 1024) {  // stale entries of re-inserted ghosts
    auto [k, s] = ghost_fifo_.front();
    ghost_fifo_.pop_front();
    auto it = ghosts_.find(k);
    if (it != ghosts_.end() && it->second == s) ghosts_.erase(it);
  }
}

std::vector<std::pair<uint64_t, uint64_t>> S3Fifo::Entries() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  out.reserve(nodes_.size());
  for (const Fifo* q : {&main_, &small_}) {
    for (const auto& [k, stamp] : *q) {
      auto it = nodes_.find(k);
      if (it != nodes_.end() && it->second.stamp == stamp) out.emplace_back(k, it->second.size());
    }
  }
  return out;
}

}  // namespace tierfs
