// Compactor: rewrites a fragmented chunk as a few new slices (issue 13, item 3).
//
// A chunk whose records pile up (a checkpoint updated tensor by tensor, a log, a database
// file) costs every read a longer scan, and every overwritten range keeps its blocks in the
// object store until the file goes. Compacting a chunk reads what its records resolve to
// (BuildSliceMap), writes each run of contiguous data as one new slice, and swaps the
// records in one compare-and-swap (Meta::SwapChunkRecords): a concurrent commit makes the
// swap fail (the new slices are deleted and the chunk is tried again later), so no write is
// lost. Unwritten ranges (fallocate) stay zero records, holes are dropped. The replaced
// slices lose their reference and their blocks are deleted once no reader can still hold
// the old map (release grace), which is what frees overwritten and punched data.
//
// When: in the background after every `check_after` commits this client made to a chunk
// (compacted if it has at least `min_records` records or more dead than live bytes), at
// once in the committing thread when a chunk reached `max_records` commits (a bound on what
// a read scans, whatever the background does), and on request (`tierfs compact`, through
// Vfs's tierfs.compact xattr: every chunk with more than one record or any dead data).
//
// Threads: any thread may call any method; one background thread works the queue. Meta
// and CachedStore outlive it; `swapped` is called after a swap (to drop this client's
// cached maps of the inode) from the compacting thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "common/status.h"
#include "meta/types.h"

namespace tierfs {

class Meta;
class CachedStore;

struct CompactorOptions {
  uint32_t check_after = 50;     // commits to one chunk before the background looks at it
  uint32_t min_records = 100;    // background: compact a chunk with this many records
  uint32_t max_records = 1000;   // commits to one chunk after which the writer compacts it
  int64_t release_grace_ns = 600'000'000'000;  // old blocks outlive the swap this long
};

struct CompactStats {
  uint64_t chunks = 0;           // chunks looked at
  uint64_t compacted = 0;        // chunks swapped
  uint64_t conflicts = 0;        // swaps refused because the chunk changed meanwhile
  uint64_t records_before = 0, records_after = 0;  // over the compacted chunks
  uint64_t live_bytes = 0;       // data the compacted chunks hold (copied into new slices)
  uint64_t dead_bytes = 0;       // referenced but shadowed bytes the compacted chunks freed
  CompactStats& operator+=(const CompactStats& o);
};

class Compactor {
 public:
  Compactor(Meta* meta, CachedStore* store, std::function<void(Ino)> swapped, CompactorOptions opts = {});
  ~Compactor();  // stops the background thread (queued work is dropped)
  Compactor(const Compactor&) = delete;
  Compactor& operator=(const Compactor&) = delete;

  // A commit of this client to chunk `index` of ino.
  void NoteCommit(Ino ino, uint32_t index);
  // Compacts every chunk of ino that gains from it (force: any chunk with more than one
  // record or with dead data; else only fragmented ones).
  Result<CompactStats> CompactFile(Ino ino, bool force);
  Result<CompactStats> CompactChunk(Ino ino, uint32_t index, bool force);

 private:
  void Loop();

  Meta* const meta_;
  CachedStore* const store_;
  const std::function<void(Ino)> swapped_;
  const CompactorOptions opts_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<Ino, uint32_t>, uint32_t> commits_;  // since the chunk was last looked at
  std::deque<std::pair<Ino, uint32_t>> queue_;
  std::set<std::pair<Ino, uint32_t>> queued_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierfs
