// InodeState: what this client knows of one inode, shared by every open handle of it, its
// writer and its readers: the cached slice maps ("segments"), the length, the change
// sequence seen, open and lock bookkeeping.
//
// The generation contract. What the state caches of the metadata (slice maps, length) is
// only ever replaced by something read after the last change this client made: every
// change (a commit, truncate, fallocate, copy_file_range, a lock taken) bumps the
// generation and drops the maps, and a value read from the engine is kept only if the
// generation did not move while it was being read. Otherwise a read that raced with a
// commit would put the pre-commit layout back into the cache, and every later read would
// return the old data. Only this class moves the generation or fills the map cache;
// RefreshLocked is the one place where a change made through the engine (or attributes
// read by an open) is taken in.
//
// Threads: any thread. `mu` guards every field; methods named ...Locked expect it held,
// the others take it themselves (and call the engine without holding it). The Meta must
// outlive the state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/status.h"
#include "meta/slice_map.h"
#include "meta/types.h"

namespace tierfs {

class FileWriter;
class Meta;

class InodeState {
 public:
  InodeState(Ino i, Meta* meta) : ino(i), meta_(meta) {}
  InodeState(const InodeState&) = delete;
  InodeState& operator=(const InodeState&) = delete;

  const Ino ino;
  std::mutex mu;

  // ---- the layout cache (the generation contract above) ----

  // The chunk's slice map: cached, or read from the engine (and cached if the generation
  // did not move meanwhile; the map read is returned either way: good for the read that
  // asked, which overlapped the change).
  Result<std::vector<ChunkSegment>> Segments(uint32_t chunk);
  // Indexes of the chunks that have records, ascending; cached like Segments.
  Result<std::vector<uint32_t>> ChunkList();
  // Caches `segs`, the map of `chunk` read from the engine while the generation was
  // `read_gen`, unless it has moved since.
  void KeepSegmentsLocked(uint32_t chunk, std::vector<ChunkSegment> segs, uint64_t read_gen);
  uint64_t Gen();
  uint64_t gen_locked() const { return gen_; }

  // ---- refresh: the one place that takes in what the engine says ----

  // Who read the attributes being taken in, which decides what they may replace.
  enum class Cause {
    // This client's writer is committing (its hook, under the writer's lock): with no
    // attributes right before its first slice, with the commit's own after the last. Those
    // are current by construction, and they are the writer's own: taken although the
    // writer still counts as dirty while the hook runs.
    kCommit,
    // A change made through the engine (truncate, fallocate, copy_file_range) or a lock
    // taken. The caller (Refresh) read the attributes until no commit of this client's
    // raced with the read. While buffered writes wait, neither the length nor the change
    // sequence is taken: the writer's pending length is ahead of the engine's, and the
    // change counts as unseen again at the next open or lock (as it always has).
    kChange,
    // An open read the attributes. The maps are dropped only when the attributes show data
    // changes this client has not seen: keeping them across opens is what the cache is for.
    // The length is taken only if the generation did not move and nothing is buffered; the
    // change sequence always counts as seen (with buffered writes the kernel keeps its
    // cache: see Vfs::OpenWithAttr).
    kOpen,
  };
  // Takes attributes `a` (nullptr: none, only drop the maps) read from the engine while
  // the generation was `read_gen` (ignored for kCommit and kChange). Returns whether `a`
  // shows data changes this client had not seen (another client's).
  bool RefreshLocked(const Attr* a, uint64_t read_gen, Cause cause);
  // After a change made through the engine: drops the cached maps and takes the inode's
  // length from `known` (read while the generation was `read_gen`) or from a fresh
  // GetAttr, reading again while a commit of this client's races with the read. Returns
  // whether the file holds data changes this client had not seen.
  Result<bool> Refresh(const Attr* known = nullptr, uint64_t read_gen = 0);

  // ---- guarded by mu ----
  std::shared_ptr<FileWriter> writer;  // created on first write
  // As last seen by this client: set by RefreshLocked, grown by this client's writes.
  uint64_t length = 0;
  int opens = 0;
  // Lock owners that took record locks on the inode through this client, each with the
  // handles it locked through. A POSIX lock's owner is a process (its descriptor table):
  // close(2) of any of its descriptors of the file drops its locks (FLUSH). An open file
  // description lock's (F_OFD_SETLK) owner is the open file itself: its locks go when the
  // last descriptor does (RELEASE). The kernel names both kinds alike, so an owner still
  // listed when a handle it locked through is released is that handle's own.
  std::map<uint64_t, std::set<uint64_t>> record_lock_owners;
  // The kernel asks for security.capability before every write(2); a recent "no such
  // xattr" answer is remembered for the attribute-cache time (1 s).
  int64_t no_caps_until_ns = 0;
  // The open cache (VfsOptions::open_cache_ns): attributes read by an open at open_attr_ns,
  // valid while the generation is open_attr_gen (no local layout change since).
  std::optional<Attr> open_attr;
  int64_t open_attr_ns = 0;
  uint64_t open_attr_gen = 0;
  // Access times (vfs_atime.cc): the inode's times as last seen (every RefreshLocked takes
  // them), the access time a read marked and that is not written yet (0: none), and
  // whether the inode waits in the Vfs's queue of such marks.
  bool times_known = false;
  int64_t atime_ns = 0, mtime_ns = 0, ctime_ns = 0;
  int64_t pending_atime_ns = 0;
  bool atime_queued = false;
  void TakeTimesLocked(const Attr& a) {
    times_known = true;
    atime_ns = a.atime_ns;
    mtime_ns = a.mtime_ns;
    ctime_ns = a.ctime_ns;
  }

 private:
  // Drops the cached maps and bumps the generation. With mu held.
  void Invalidate();

  Meta* const meta_;
  std::map<uint32_t, std::vector<ChunkSegment>> chunks_;  // resolved slice maps
  std::optional<std::vector<uint32_t>> chunk_list_;        // indexes of chunks with records
  uint64_t gen_ = 0;                                       // bumped by every local layout change
  // The inode's change sequence (Attr::seq, bumped by every commit, truncation, punch...)
  // up to which the kernel's page cache of the file is known to hold what the file holds:
  // changes this client made itself, and those it dropped the cache for (keep_cache).
  uint64_t seen_seq_ = 0;
};

// Every chunk's slice map (with its index) as the engine holds it now, bypassing any
// client cache: for the layout and cache xattrs, which must show the volume's state.
Result<std::vector<std::pair<uint32_t, std::vector<ChunkSegment>>>> ReadSliceMaps(Meta* meta, Ino ino);

}  // namespace tierfs
