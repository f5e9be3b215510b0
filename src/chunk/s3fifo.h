// S3Fifo: the eviction policy of the block caches (memory and disk), after "FIFO queues are
// all you need for cache eviction" (Yang et al., SOSP 2023).
//
// Three FIFO queues over 64-bit block fingerprints: a small queue (a tenth of the capacity)
// that every new block enters, a main queue, and a ghost queue that remembers only the
// fingerprints of blocks recently evicted from the small queue. A block read again while in
// the small queue moves to the main queue when it reaches the small queue's end; one that
// was not is evicted and remembered as a ghost. A block inserted while it is a ghost goes
// straight to the main queue. The main queue gives blocks with hits another round
// (decrementing a 2-bit counter) and evicts the others.
//
// Why not LRU: one pass over a data set larger than the cache (an epoch, a scan, a
// warm-up of something else) flows through the small queue and leaves the main queue, the
// hot set, alone.
//
// A hit counts only when it comes at least `correlated_ms` after the block's insertion or
// its last counted hit: the many reads of one block by one sequential stream (a 4 MiB block
// is read in 32 pieces of 128 KiB) are one reference, not a sign that the block is hot (the
// correlated reference period of 2Q and LRU-K). Callers pass the time in milliseconds.
//
// Memory: about 77 bytes per cached block (measured over a million blocks: the hash node
// and a queue entry), plus about 50 per remembered ghost (at most as many ghosts as blocks
// in the main queue). Not thread-safe: the owner locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tierfs {

class S3Fifo {
 public:
  explicit S3Fifo(uint64_t capacity_bytes, uint32_t correlated_ms = 0)
      : capacity_(capacity_bytes), correlated_ms_(correlated_ms) {}

  // Counts a hit on the block at time now_ms; false when it is not cached.
  bool Touch(uint64_t key, uint32_t now_ms = 0);
  bool Contains(uint64_t key) const { return nodes_.count(key) != 0; }
  // The cached size of the block, or 0.
  uint64_t SizeOf(uint64_t key) const;
  // Inserts the block (or replaces its size), then evicts down to the capacity, appending
  // the evicted fingerprints to *evicted (never `key` itself unless it alone is larger than
  // the capacity, in which case it is not inserted and false is returned).
  bool Insert(uint64_t key, uint64_t size, std::vector<uint64_t>* evicted, uint32_t now_ms = 0);
  // Inserts straight into the main queue without evicting (a cache reloading what it held
  // before a restart); call Trim afterwards.
  void Restore(uint64_t key, uint64_t size);
  bool Erase(uint64_t key);
  // Evicts until at most `target` bytes are cached.
  void Trim(uint64_t target, std::vector<uint64_t>* evicted);
  void set_capacity(uint64_t bytes) { capacity_ = bytes; }

  uint64_t capacity() const { return capacity_; }
  uint64_t bytes() const { return small_bytes_ + main_bytes_; }
  size_t count() const { return nodes_.size(); }
  // Every cached fingerprint with its size, main queue first, oldest first within each.
  std::vector<std::pair<uint64_t, uint64_t>> Entries() const;

 private:
  enum Queue : uint8_t { kSmall = 0, kMain = 1 };
  struct Node {
    uint32_t stamp;  // matches the queue entry that is live; older entries are stale
    uint32_t size_lo;
    uint16_t size_hi;
    uint8_t queue;
    uint8_t freq;  // hits since insertion or the last second chance, saturating at 3
    uint32_t touched_ms;  // insertion or last counted hit
    uint64_t size() const { return size_lo | (static_cast<uint64_t>(size_hi) << 32); }
  };
  using Fifo = std::deque<std::pair<uint64_t, uint32_t>>;  // (key, stamp), front = oldest

  void Push(uint64_t key, Node& n, Queue q);
  void EvictOne(std::vector<uint64_t>* evicted);
  // Pops stale entries; returns the live oldest entry's node, or nullptr when empty.
  Node* Oldest(Fifo& q, uint64_t* key);
  void RememberGhost(uint64_t key);
  void Unlink(uint64_t key, Node& n);

  uint64_t capacity_;
  uint32_t correlated_ms_;
  uint64_t small_bytes_ = 0, main_bytes_ = 0;
  size_t main_count_ = 0;
  uint32_t next_stamp_ = 0;
  std::unordered_map<uint64_t, Node> nodes_;
  Fifo small_, main_;
  std::deque<std::pair<uint64_t, uint32_t>> ghost_fifo_;
  std::unordered_map<uint64_t, uint32_t> ghosts_;  // key -> stamp of its ghost_fifo_ entry
};

}  // namespace tierfs
