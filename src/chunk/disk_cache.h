// DiskCache: the second level of the block cache, whole blocks on local disks
// (`mount --cache-dir DIR[:DIR...]`), spread over one CacheDir per directory by the block
// key's fingerprint.
//
// The cache never turns a good read into an error: a directory that cannot be opened is
// left out at mount (logged), one that fails later is taken out of use, and every fault of a
// block file is a miss (chunk/cache_dir.h). Writes are asynchronous: Put queues the block
// (shared, not copied) for a writer thread and drops it when the queued bytes pass
// max_pending_bytes, so a slow disk never slows a reader or a writer down.
//
// Threads: any thread may call any method.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chunk/cache_dir.h"

namespace tierfs {

class ThreadPool;

struct DiskCacheOptions {
  std::vector<std::string> dirs;  // the cache lives in DIR/volume_uuid/ of each
  std::string volume_uuid;
  uint64_t capacity = 100ull << 30;  // over all directories, split evenly
  double free_space_ratio = 0.1;     // keep at least this share of each disk free
  uint64_t max_pending_bytes = 64ull << 20;
  int write_threads = 2;
  uint32_t correlated_ms = 1000;  // see S3Fifo
};

struct DiskCacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0, writes = 0, corrupt = 0, errors = 0;
  uint64_t bytes = 0, blocks = 0, capacity = 0;
  uint64_t dropped_writes = 0;  // blocks not cached because the write queue was full
  int dirs = 0, dirs_down = 0;
};

class DiskCache {
 public:
  // Opens the directories that can be used; the others are logged and left out.
  explicit DiskCache(DiskCacheOptions opts);
  ~DiskCache();  // waits for queued writes
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  // Whether any directory is in use.
  bool enabled() const { return !dirs_.empty(); }
  bool Contains(const std::string& key) const;
  bool Read(const std::string& key, uint32_t block_len, uint32_t off, uint32_t len, char* dst);
  std::shared_ptr<const std::string> ReadBlock(const std::string& key, uint32_t block_len);
  void Put(const std::string& key, std::shared_ptr<const std::string> block);
  // Stores the block in the calling thread (warm-up: nothing is dropped).
  void PutNow(const std::string& key, const std::shared_ptr<const std::string>& block);
  void Erase(const std::string& key);
  // Waits until every queued write is done (tests, warm-up).
  void Drain();

  DiskCacheStats stats() const;
  // The directories in use (DIR/UUID), for logs and `status`.
  std::vector<std::string> roots() const;

 private:
  CacheDir* DirFor(uint64_t fp) const;

  DiskCacheOptions opts_;
  std::vector<std::unique_ptr<CacheDir>> dirs_;
  std::atomic<uint64_t> dropped_writes_{0};
  std::mutex pending_mu_;
  std::condition_variable pending_cv_;
  uint64_t pending_bytes_ = 0;
  uint64_t pending_writes_ = 0;
  std::unique_ptr<ThreadPool> writers_;  // declared last: joined first
};

}  // namespace tierfs
