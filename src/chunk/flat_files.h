// FlatFiles: whole-file copies of files whose blocks are all in the disk cache, for the
// kernel to read directly (FUSE passthrough: fuse/kernel_passthrough.h). The disk cache
// holds blocks with checksummed segments (chunk/cache_file.h); the kernel needs one plain
// file whose byte n is the file's byte n, so a hot file gets a second, flat representation.
//
// Layout (ROOT is DIR/VOLUME-UUID/flat of the first cache directory):
//   ROOT/NAME        the file's bytes, mode 0600; NAME is the layout fingerprint (32 hex
//                    digits of XXH3-128 over the file's length and slice maps: slices are
//                    immutable, so one layout names one content for good)
//   ROOT/NAME.sums   XXH3-64 of every 1 MiB stripe of NAME, 8 bytes each, then one more of
//                    the list itself
//   ROOT/tmp/        copies being built, renamed into ROOT when complete and synced
//
// Trust. A copy is built from bytes the block cache verified (Fill reads them through the
// store) and its sums are taken from the written file. A copy is served (Ready) only once
// verified in this process: one built now is; one found at start, left by an earlier
// mount, is hashed again against its sums by the worker first (all of them from the start,
// newest first; one an open asks for goes to the front), and removed if they differ or
// either file is short. After that the kernel reads it without TierFS seeing the
// reads, so damage done to a verified copy while mounted is out of reach, as it is for any
// local file; every remount checks again.
//
// Capacity. Copies take at most `capacity` bytes; building one evicts the least recently
// used others (one in use is unlinked: the kernel keeps reading the open file), but never
// one used within `keep` (10 minutes by default): when the copies do not fit, the newest
// wait instead of churning. A data set read in epochs that does not fit would otherwise
// be copied again in every epoch, doubling the cache disk's writes; this way the first
// `capacity` bytes keep their copies and the rest is read through the cache. A copy is
// not built when it alone exceeds the capacity, or when the disk would fall below its
// free-space floor.
//
// Threads: every method may be called from any thread; builds and checks run one at a time
// on the store's worker thread, never on the caller's.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

namespace tierfs {

struct FlatFilesStats {
  uint64_t copies = 0, bytes = 0, capacity = 0;
  uint64_t built = 0, verified = 0, damaged = 0, evicted = 0, failed = 0;
};

class FlatFiles {
 public:
  // Writes the file's bytes into fd (pwrite; the file is already sized, holes read as
  // zeros). An error abandons the copy.
  using Fill = std::function<Status(int fd)>;

  // Creates ROOT (and ROOT/tmp, emptied), lists the copies it holds (unverified).
  static constexpr int64_t kKeepNs = 600'000'000'000;
  static Result<std::unique_ptr<FlatFiles>> Open(const std::string& root, uint64_t capacity,
                                                 double free_space_ratio, int64_t keep_ns = kKeepNs);
  ~FlatFiles();  // stops the worker; a build under way is abandoned
  FlatFiles(const FlatFiles&) = delete;
  FlatFiles& operator=(const FlatFiles&) = delete;

  // The path of the verified copy named `name`, or "" when there is none yet (a copy found
  // at start and not checked yet moves to the front of the queue).
  std::string Ready(const std::string& name);
  // Whether Want would queue a build of copy `name` (size bytes): none exists or is queued
  // under that name, and it fits the capacity. Lets a caller skip preparing one.
  bool WouldBuild(const std::string& name, uint64_t size) const;
  // Queues a build of copy `name` (size bytes) unless it exists, is queued, or cannot fit.
  void Want(const std::string& name, uint64_t size, Fill fill);
  // Drops copy `name` (tests; a fill found it stale).
  void Erase(const std::string& name);
  // Waits until the worker has nothing queued (tests, benchmarks).
  void WaitIdle();

  FlatFilesStats stats() const;
  const std::string& root() const { return root_; }

 private:
  struct Copy {
    uint64_t size = 0;
    bool verified = false;
    bool queued = false;  // a build or check waits or runs
    uint64_t last_use = 0;  // order of use (tick_)
    int64_t used_ns = 0;    // monotonic time of the last use (0: before this process)
  };
  struct Job {
    std::string name;
    uint64_t size = 0;
    Fill fill;  // empty: check a found copy
  };

  FlatFiles(std::string root, uint64_t capacity, double free_space_ratio, int64_t keep_ns);
  void Loop();
  void Run(Job& job);
  Status Build(const Job& job);
  Status Check(const std::string& name, uint64_t size);
  // Evicts least recently used copies until `need` more bytes fit; with mu_ held.
  bool MakeRoomLocked(uint64_t need);
  void RemoveFiles(const std::string& name);
  std::string PathOf(const std::string& name) const { return root_ + "/" + name; }

  const std::string root_;
  const uint64_t capacity_;
  const double free_space_ratio_;
  const int64_t keep_ns_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Copy> copies_;  // guarded by mu_ (building ones included)
  std::deque<Job> jobs_;                // guarded by mu_
  bool running_ = false;                // a job is under way; guarded by mu_
  bool stop_ = false;                   // guarded by mu_
  uint64_t bytes_ = 0;                  // sizes of copies_; guarded by mu_
  uint64_t tick_ = 0;                   // guarded by mu_
  FlatFilesStats counts_;               // built .. failed; guarded by mu_
  bool said_no_room_ = false;           // guarded by mu_
  std::thread worker_;
};

}  // namespace tierfs
