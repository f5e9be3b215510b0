// BlockCache: the memory cache of immutable blocks (the first level of the hierarchy),
// evicting with S3-FIFO (chunk/s3fifo.h) so that a scan does not flush the hot blocks.
//
// Blocks are shared: Get hands out a reference to the cached buffer, which stays valid after
// eviction for as long as the caller holds it (so a block can reach a FUSE reply without a
// copy). Capacity counts the bytes of the cached blocks. Every operation is O(1)
// (amortized) and thread-safe: any thread may call any method.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "chunk/s3fifo.h"

namespace tierfs {

struct BlockCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t bytes = 0;   // bytes currently cached
  uint64_t blocks = 0;  // blocks currently cached
};

class BlockCache {
 public:
  // correlated_ms: see S3Fifo (hits closer together than this count once).
  explicit BlockCache(uint64_t capacity_bytes, uint32_t correlated_ms = 1000);
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // The cached block, or null. Counts a hit or a miss and marks the block recently used.
  std::shared_ptr<const std::string> Get(const std::string& key);
  // Like Get, but does not count a hit or a miss (internal re-checks, prefetch decisions).
  std::shared_ptr<const std::string> Peek(const std::string& key);
  bool Contains(const std::string& key) const;
  // Inserts or replaces the block and evicts blocks down to capacity.
  // A block larger than the whole capacity is not cached (any older entry for key is
  // dropped). A null block is ignored.
  void Put(const std::string& key, std::shared_ptr<const std::string> block);
  void Erase(const std::string& key);
  void Clear();

  uint64_t capacity() const { return capacity_; }
  BlockCacheStats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const std::string> block;
  };

  std::shared_ptr<const std::string> Lookup(const std::string& key, bool count);
  // Drops the entry of `fp`; its block moves to *released so the caller frees it after
  // unlocking.
  void EraseLocked(uint64_t fp, std::vector<std::shared_ptr<const std::string>>* released);

  const uint64_t capacity_;
  const uint32_t correlated_ms_;
  mutable std::mutex mu_;
  S3Fifo policy_;
  std::unordered_map<uint64_t, Entry> blocks_;  // by Hash64 of the key
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace tierfs
