// CacheDir: one directory of the disk cache (`mount --cache-dir`), holding the blocks of one
// volume under DIR/VOLUME-UUID/.
//
// Layout:
//   blocks/HH/FFFFFFFFFFFFFFFF   one block per file (chunk/cache_file.h), mode 0600, named by
//                                its key's fingerprint (Hash64) in hex, HH its last byte
//   tmp/                         blocks being written; renamed into blocks/ when complete
//   index                        journal of 16-byte records: what blocks/ holds
//   clean                        present only while no client uses the directory
//   lock                         flock'ed by the client using the directory (one at a time)
//
// The index is what makes a restart cheap: it is replayed at open (16 bytes per block, no
// directory scan) so a remounted client serves what it cached at once. A record is appended
// after its file is renamed into place (add) and before its file is unlinked (delete), so
// after a crash the index names no block that is half written; a file written but not yet
// recorded is an orphan, removed by a background sweep when the directory was not closed
// cleanly. The journal is rewritten from the live set when it grows to twice that.
//
// Faults never fail a read: a missing, short or damaged file (checksum, key or length
// mismatch) is dropped and counted, and the caller reads from the store; an I/O error or an
// operation slower than kStallSeconds takes the directory out of use (down) for the rest of
// the mount. ENOSPC and the free-space floor shrink the cache instead.
//
// Threads: every method may be called from any thread; disk I/O runs without the lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "chunk/s3fifo.h"
#include "common/status.h"

namespace tierfs {

class BufferPool;

struct CacheDirStats {
  uint64_t hits = 0, misses = 0, evictions = 0, writes = 0, corrupt = 0, errors = 0;
  uint64_t bytes = 0, blocks = 0, capacity = 0;
  bool down = false;
};

class CacheDir {
 public:
  // Opens (creating if needed) DIR/UUID, takes its lock and replays its index. Errors: the
  // directory cannot be created or used, or another client holds it (EBUSY).
  static Result<std::unique_ptr<CacheDir>> Open(const std::string& dir, const std::string& uuid, uint64_t capacity,
                                                double free_space_ratio, uint32_t correlated_ms = 1000);
  // Rewrites the index from the live set and marks the directory clean.
  ~CacheDir();

  const std::string& root() const { return root_; }
  bool down() const { return down_.load(); }
  bool Contains(uint64_t fp) const;

  // Bytes [off, off+len) of block `key` (fingerprint fp, block_len bytes) into dst, each
  // touched segment verified. False on a miss or any fault (see above).
  bool Read(uint64_t fp, const std::string& key, uint32_t block_len, uint32_t off, uint32_t len, char* dst);
  // The whole block, verified, or null. With a pool, the block is read into a recycled
  // buffer and goes back to the pool when released.
  std::shared_ptr<const std::string> ReadBlock(uint64_t fp, const std::string& key, uint32_t block_len,
                                               BufferPool* pool = nullptr);
  // Stores the block (synchronously; callers run it on a background thread). True when it
  // wrote the file (false: already cached, no room, or a fault). sums: EncodeCacheHeader's.
  bool Write(uint64_t fp, const std::string& key, std::string_view data, const std::vector<uint32_t>* sums = nullptr);
  void Erase(uint64_t fp);
  // Waits for the orphan sweep (tests).
  void WaitSweep();

  CacheDirStats stats() const;

 private:
  CacheDir(std::string root, uint64_t capacity, double free_space_ratio, uint32_t correlated_ms, int lock_fd);
  // Loads the index; *damaged when a record was unreadable (what follows it is dropped).
  Status Replay(bool* damaged);
  std::string BlockPath(uint64_t fp) const;
  // Appends records; with mu_ held.
  void Journal(char op, uint64_t fp, uint64_t size);
  void JournalEvicted(const std::vector<uint64_t>& evicted);
  void CompactLocked();
  void Unlink(const std::vector<uint64_t>& fps);
  // A fault of the file: drop the block.
  void Drop(uint64_t fp, const char* why);
  void MarkDown(const std::string& why);
  // Checks an operation's duration; true when it stalled (the directory is then down).
  bool Stalled(int64_t start_ns, const char* what);
  // Evicts when the disk's free space is below the floor; false when it stays below.
  bool CheckFreeSpace(uint64_t incoming);
  void Sweep();
  // Counts a hit on the block and opens it (OpenBlock); -1 on a miss or a fault.
  int Lookup(uint64_t fp, const std::string& key, uint32_t block_len, struct CacheHeader* h);
  // Opens and checks the file's header; -1 on a fault (dropped or down).
  int OpenBlock(uint64_t fp, const std::string& key, uint32_t block_len, struct CacheHeader* h);
  // Reads [off, off+len) of the open block file fd (from Lookup), verifies it and closes fd.
  bool ReadOpen(int fd, uint64_t fp, const struct CacheHeader& h, uint32_t block_len, uint32_t off, uint32_t len,
                char* dst, int64_t t0);

  const std::string root_;
  const double free_space_ratio_;
  const int lock_fd_;
  std::atomic<bool> down_{false};
  std::atomic<bool> stopping_{false};  // ends the sweep early

  mutable std::mutex mu_;  // guards policy_, the journal and the counters below
  S3Fifo policy_;
  int journal_fd_ = -1;
  uint64_t journal_records_ = 0;
  bool space_low_ = false;  // the disk was under the free-space floor (warned once)
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0, writes_ = 0, corrupt_ = 0, errors_ = 0;

  std::thread sweeper_;
};

}  // namespace tierfs
