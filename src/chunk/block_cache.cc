#include "chunk/block_cache.h"

namespace tierfs {

BlockCache::BlockCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

std::shared_ptr<const std::string> BlockCache::Get(const std::string& key) { return Lookup(key, true); }

std::shared_ptr<const std::string> BlockCache::Peek(const std::string& key) { return Lookup(key, false); }

std::shared_ptr<const std::string> BlockCache::Lookup(const std::string& key, bool count) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    if (count) ++misses_;
    return nullptr;
  }
  if (count) ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->block;
}

bool BlockCache::Contains(const std::string& key) const {
  std::lock_guard<std::mutex> l(mu_);
  return index_.count(key) != 0;
}

void BlockCache::Put(const std::string& key, std::shared_ptr<const std::string> block) {
  if (!block) return;
  // Displaced and evicted blocks are released after unlocking: dropping the last reference
  // to a multi-megabyte buffer is not free.
  std::vector<std::shared_ptr<const std::string>> released;
  std::lock_guard<std::mutex> l(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) EraseLocked(it->second, &released);
  if (block->size() > capacity_) {
    released.push_back(std::move(block));
    return;
  }
  bytes_ += block->size();
  lru_.push_front(Entry{key, std::move(block)});
  index_.emplace(key, lru_.begin());
  while (bytes_ > capacity_ && !lru_.empty()) {
    EraseLocked(std::prev(lru_.end()), &released);
    ++evictions_;
  }
}

void BlockCache::Erase(const std::string& key) {
  std::vector<std::shared_ptr<const std::string>> released;
  std::lock_guard<std::mutex> l(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) EraseLocked(it->second, &released);
}

void BlockCache::Clear() {
  List dropped;
  std::lock_guard<std::mutex> l(mu_);
  dropped.swap(lru_);
  index_.clear();
  bytes_ = 0;
}

void BlockCache::EraseLocked(List::iterator it, std::vector<std::shared_ptr<const std::string>>* released) {
  bytes_ -= it->block->size();
  released->push_back(std::move(it->block));
  index_.erase(it->key);
  lru_.erase(it);
}

BlockCacheStats BlockCache::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return BlockCacheStats{hits_, misses_, evictions_, bytes_, lru_.size()};
}

}  // namespace tierfs
