// Buffers the writes of one inode as slices and commits them.
//
// A write that continues (or overwrites the still-buffered part of) an open slice goes into
// it; anything else opens a new slice. Full blocks are uploaded while the application keeps
// writing; Flush() uploads the rest and commits every slice in write order, so later writes
// shadow earlier ones. A failed upload or commit is remembered and returned by the next
// Write/Flush, so the application learns of it at write, fsync or close.
//
// Commits and readers: the hook given at construction runs under the writer's lock right
// before a flush commits its first slice and right after it committed the last (with the
// inode's attributes then, or nullptr when nothing was committed). A reader that caches
// what the metadata says of the file drops it there: it cannot see the writer clean
// before the hook has run, nor keep a view read before the commit.
//
// Threads: any thread; one mutex serializes the writes of the inode. Dirty() and
// PendingLength() take no lock, so they may be called while holding the hook's lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "meta/types.h"

namespace tierfs {

class Meta;
class CachedStore;
class SliceWriter;

class FileWriter {
 public:
  using CommitHook = std::function<void(const Attr* after)>;
  // `committed` runs after each slice committed, with its chunk (compaction counts them),
  // on the committing thread with the writer's lock held.
  FileWriter(Ino ino, Meta* meta, CachedStore* store, CommitHook hook = nullptr,
             std::function<void(uint32_t chunk)> committed = nullptr);
  ~FileWriter();

  Status Write(uint64_t off, const char* data, size_t len);
  // Uploads and commits everything buffered. Returns (and clears) a sticky error.
  Status Flush();
  // Drops everything buffered without committing it (the handles that wrote it were fenced:
  // Vfs::OnSessionLost); its uploaded blocks are left to gc.
  void Discard();
  // Highest end offset written since the last commit (0 when clean).
  uint64_t PendingLength() const { return pending_length_.load(); }
  // Bytes written since the last commit (overwrites count again).
  uint64_t PendingBytes() const { return pending_bytes_.load(); }
  // Something is buffered (or a sticky error waits): true until a flush has committed it
  // and run the hook.
  bool Dirty() const { return dirty_.load(); }
  int64_t DirtySinceNs() const { return dirty_since_ns_.load(); }

 private:
  // Forgets every slice (already committed or aborted) and the pending state; tells the hook
  // what was committed (null: nothing). mu_ held.
  void ClearLocked(const Attr* committed);
  struct OpenSlice {
    uint32_t chunk;
    uint32_t pos;  // position in the chunk
    std::unique_ptr<SliceWriter> writer;
  };
  Status WritePiece(uint32_t chunk, uint32_t pos, const char* data, uint32_t len);
  Status FlushLocked();

  Ino ino_;
  Meta* meta_;
  CachedStore* store_;
  CommitHook hook_;
  std::function<void(uint32_t)> committed_;
  std::mutex mu_;
  std::vector<OpenSlice> slices_;  // guarded by mu_
  Status error_;                   // guarded by mu_
  // Written under mu_, read without it.
  std::atomic<uint64_t> pending_length_{0};
  std::atomic<uint64_t> pending_bytes_{0};
  std::atomic<int64_t> dirty_since_ns_{0};
  std::atomic<bool> dirty_{false};
};

}  // namespace tierfs
