// Internal to the vfs files (vfs*.cc): the per-inode state and the open handle.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "meta/slice_map.h"
#include "meta/types.h"

namespace tierfs {

class FileWriter;

// Per-inode state shared by the handles of one inode.
//
// What it caches of the metadata (slice maps, length) is only ever replaced by something
// read after the last change this client made: every change (a commit, truncate,
// fallocate, copy_file_range, a lock taken) bumps `gen` and drops the maps, and a value
// read from the engine is kept only if `gen` did not move while it was being read.
// Otherwise a read that raced with a commit would put the pre-commit layout back into the
// cache, and every later read would return the old data.
struct InodeState {
  explicit InodeState(Ino i) : ino(i) {}
  Ino ino;
  std::mutex mu;
  std::shared_ptr<FileWriter> writer;                // created on first write
  std::map<uint32_t, std::vector<ChunkSegment>> chunks;  // resolved slice maps
  std::optional<std::vector<uint32_t>> chunk_list;       // indexes of chunks with records
  uint64_t gen = 0;                                  // bumped by every local layout change
  uint64_t length = 0;                               // as last seen by this client
  // The inode's change sequence (Attr::seq, bumped by every commit, truncation, punch...)
  // up to which the kernel's page cache of the file is known to hold what the file holds:
  // changes this client made itself, and those it dropped the cache for (keep_cache).
  uint64_t seen_seq = 0;
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
  // valid while gen == open_attr_gen (no local layout change since).
  std::optional<Attr> open_attr;
  int64_t open_attr_ns = 0;
  uint64_t open_attr_gen = 0;

  // Both with mu held.
  void Invalidate() {
    chunks.clear();
    chunk_list.reset();
    ++gen;
  }
  // Takes the length of `a`, read from the engine after this client's last change, and
  // counts its data changes as seen (made here, or the kernel's cache was dropped for them).
  void Seen(const Attr& a) {
    length = a.length;
    seen_seq = std::max(seen_seq, a.seq);
  }
};

// The kernel asks for security.capability before every write(2).
constexpr const char* kCapsXattr = "security.capability";
constexpr int64_t kNegativeXattrNs = 1'000'000'000;

struct Handle {
  Ino ino = 0;
  int flags = 0;
  bool is_dir = false;
  bool flocked = false;  // took a flock: dropped when the open file description goes
  std::shared_ptr<InodeState> state;
  // reader: sequential-stream detection and readahead window
  std::mutex read_mu;
  uint64_t last_end = 0;
  uint64_t window = 0;
  uint64_t prefetched_to = 0;
  // directory snapshot
  std::mutex dir_mu;
  bool have_snapshot = false;
  std::vector<DirEntry> entries;
};

}  // namespace tierfs
