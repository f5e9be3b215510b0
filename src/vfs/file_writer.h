// Buffers the writes of one inode as slices and commits them.
//
// A write that continues (or overwrites the still-buffered part of) an open slice goes into
// it; anything else opens a new slice. Full blocks are uploaded while the application keeps
// writing; Flush() uploads the rest and commits every slice in write order, so later writes
// shadow earlier ones. A failed upload or commit is remembered and returned by the next
// Write/Flush, so the application learns of it at write, fsync or close.
//
// Threads: any thread; one mutex serializes the writes of the inode.
#pragma once

#include <cstdint>
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
  FileWriter(Ino ino, Meta* meta, CachedStore* store);
  ~FileWriter();

  Status Write(uint64_t off, const char* data, size_t len);
  // Uploads and commits everything buffered. Returns (and clears) a sticky error. When
  // something was committed and `attr` is given, it receives the inode's new attributes.
  Status Flush(Attr* attr = nullptr, bool* committed = nullptr);
  // Highest end offset written since the last commit (0 when clean).
  uint64_t PendingLength();
  bool Dirty();
  int64_t DirtySinceNs();

 private:
  struct OpenSlice {
    uint32_t chunk;
    uint32_t pos;  // position in the chunk
    std::unique_ptr<SliceWriter> writer;
  };
  Status WritePiece(uint32_t chunk, uint32_t pos, const char* data, uint32_t len);
  Status FlushLocked(Attr* attr = nullptr, bool* committed = nullptr);

  Ino ino_;
  Meta* meta_;
  CachedStore* store_;
  std::mutex mu_;
  std::vector<OpenSlice> slices_;
  uint64_t pending_length_ = 0;
  int64_t dirty_since_ns_ = 0;
  Status error_;
};

}  // namespace tierfs
