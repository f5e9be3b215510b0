// DiskCache: the second level of the block cache, whole blocks on local disks
// (`mount --cache-dir DIR[:DIR...]`), spread over one CacheDir per directory by the block
// key's fingerprint.
//
// The cache never turns a good read into an error: a directory that cannot be opened is
// left out at mount (logged), one that fails later is taken out of use, and every fault of a
// block file is a miss (chunk/cache_dir.h). Fills are asynchronous: Put queues the block
// (shared, not copied) for a writer thread and drops it (counted: dropped_writes) when the
// queued bytes would pass the fill queue's limit, so a slow disk never slows a reader or a
// writer down. The limit follows the disks' measured write speed (FillQueueLimit): what
// they write in queue_seconds, within [min_pending_bytes, max_pending_bytes]. PutNow, for
// warm-ups, never drops: it writes in the caller's thread (after the queued write of the
// same block, if there is one).
//
// Threads: any thread may call any method.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "chunk/cache_dir.h"

namespace tierfs {

class BufferPool;
class ThreadPool;

struct DiskCacheOptions {
  std::vector<std::string> dirs;  // the cache lives in DIR/volume_uuid/ of each
  std::string volume_uuid;
  uint64_t capacity = 100ull << 30;  // over all directories, split evenly
  double free_space_ratio = 0.1;     // keep at least this share of each disk free
  // The fill queue: queue_seconds of the measured write speed, between the two bounds;
  // initial_pending_bytes until a write was measured. The queued blocks are memory.
  double queue_seconds = 2.0;
  uint64_t min_pending_bytes = 32ull << 20;
  uint64_t max_pending_bytes = 256ull << 20;
  uint64_t initial_pending_bytes = 64ull << 20;
  int write_threads = 2;
  uint32_t correlated_ms = 1000;  // see S3Fifo
};

struct DiskCacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0, writes = 0, corrupt = 0, errors = 0;
  uint64_t bytes = 0, blocks = 0, capacity = 0;
  uint64_t dropped_writes = 0;  // fills dropped because the fill queue was full
  uint64_t queue_limit = 0;     // the fill queue's current limit, bytes
  uint64_t write_bytes_per_s = 0;  // the measured write speed (0: not measured yet)
  int dirs = 0, dirs_down = 0;
};

// The fill queue's limit for a measured write speed of the cache's disks (bytes per
// second over all writer threads; 0: not measured yet).
uint64_t FillQueueLimit(const DiskCacheOptions& o, double bytes_per_s);

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
  std::shared_ptr<const std::string> ReadBlock(const std::string& key, uint32_t block_len,
                                               BufferPool* pool = nullptr);  // CacheDir::ReadBlock
  // sums: the block's segment checksums when the caller verified them (CacheDir::Write).
  void Put(const std::string& key, std::shared_ptr<const std::string> block, std::vector<uint32_t> sums = {});
  // Stores the block in the calling thread (warm-up: nothing is dropped); when a fill of
  // the same block is queued or running, waits for it instead.
  void PutNow(const std::string& key, const std::shared_ptr<const std::string>& block);
  void Erase(const std::string& key);
  // Waits until every queued write is done (tests, warm-up).
  void Drain();

  DiskCacheStats stats() const;
  // The directories in use (DIR/UUID), for logs and `status`.
  std::vector<std::string> roots() const;

 private:
  CacheDir* DirFor(uint64_t fp) const;
  // Writes one block, timing it into the speed; `fp` is in pending_fps_ meanwhile.
  void WriteMeasured(CacheDir* d, uint64_t fp, const std::string& key, const std::string& block,
                     const std::vector<uint32_t>* sums = nullptr);

  DiskCacheOptions opts_;
  std::vector<std::unique_ptr<CacheDir>> dirs_;
  std::atomic<uint64_t> dropped_writes_{0};
  mutable std::mutex pending_mu_;  // guards what follows
  std::condition_variable pending_cv_;
  uint64_t pending_bytes_ = 0;
  uint64_t pending_writes_ = 0;
  std::unordered_set<uint64_t> pending_fps_;  // queued or being written
  double write_bps_ = 0;                      // moving average of one write's speed x threads
  uint64_t limit_ = 0;
  std::unique_ptr<ThreadPool> writers_;  // declared last: joined first
};

}  // namespace tierfs
