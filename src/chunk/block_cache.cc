#include "chunk/block_cache.h"

#include "common/clock.h"
#include "common/hash.h"

namespace tierfs {

namespace {
uint32_t NowMs() { return static_cast<uint32_t>(MonoNanos() / 1'000'000); }
}  // namespace

BlockCache::BlockCache(uint64_t capacity_bytes, uint32_t correlated_ms)
    : capacity_(capacity_bytes), correlated_ms_(correlated_ms), policy_(capacity_bytes, correlated_ms) {}

std::shared_ptr<const std::string> BlockCache::Get(const std::string& key) { return Lookup(key, true); }

std::shared_ptr<const std::string> BlockCache::Peek(const std::string& key) { return Lookup(key, false); }

std::shared_ptr<const std::string> BlockCache::Lookup(const std::string& key, bool count) {
  uint64_t fp = Hash64(key);
  std::lock_guard<std::mutex> l(mu_);
  auto it = blocks_.find(fp);
  if (it == blocks_.end() || it->second.key != key) {
    if (count) ++misses_;
    return nullptr;
  }
  if (count) {
    ++hits_;
    policy_.Touch(fp, NowMs());
  }
  return it->second.block;
}

bool BlockCache::Contains(const std::string& key) const {
  uint64_t fp = Hash64(key);
  std::lock_guard<std::mutex> l(mu_);
  auto it = blocks_.find(fp);
  return it != blocks_.end() && it->second.key == key;
}

void BlockCache::Put(const std::string& key, std::shared_ptr<const std::string> block) {
  if (!block) return;
  uint64_t fp = Hash64(key);
  // Displaced and evicted blocks are released after unlocking: dropping the last reference
  // to a multi-megabyte buffer is not free.
  std::vector<std::shared_ptr<const std::string>> released;
  std::vector<uint64_t> evicted;
  std::lock_guard<std::mutex> l(mu_);
  EraseLocked(fp, &released);
  if (!policy_.Insert(fp, block->size(), &evicted, NowMs())) {
    released.push_back(std::move(block));
  } else {
    blocks_.emplace(fp, Entry{key, std::move(block)});
  }
  for (uint64_t e : evicted) {
    auto it = blocks_.find(e);
    if (it == blocks_.end()) continue;
    released.push_back(std::move(it->second.block));
    blocks_.erase(it);
    ++evictions_;
  }
}

void BlockCache::Erase(const std::string& key) {
  uint64_t fp = Hash64(key);
  std::vector<std::shared_ptr<const std::string>> released;
  std::lock_guard<std::mutex> l(mu_);
  auto it = blocks_.find(fp);
  if (it != blocks_.end() && it->second.key == key) EraseLocked(fp, &released);
}

void BlockCache::Clear() {
  std::unordered_map<uint64_t, Entry> dropped;
  std::lock_guard<std::mutex> l(mu_);
  dropped.swap(blocks_);
  policy_ = S3Fifo(capacity_, correlated_ms_);
}

void BlockCache::EraseLocked(uint64_t fp, std::vector<std::shared_ptr<const std::string>>* released) {
  auto it = blocks_.find(fp);
  if (it == blocks_.end()) return;
  policy_.Erase(fp);
  released->push_back(std::move(it->second.block));
  blocks_.erase(it);
}

BlockCacheStats BlockCache::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return BlockCacheStats{hits_, misses_, evictions_, policy_.bytes(), blocks_.size()};
}

}  // namespace tierfs
