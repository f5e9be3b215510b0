// FileReader: reads the data of one open file handle and keeps its readahead window.
//
// Read fills a range with the file's committed data: for each chunk the range touches it
// takes the slice map (later slices shadow earlier ones) from the inode's InodeState, which
// caches maps per inode for all of its handles under the generation contract described in
// inode_state.h, and reads the slices' bytes through the CachedStore. Holes and gaps
// between slices read as zeros. The reader never sees buffered writes: the caller
// (Vfs::Read) commits them first (read-your-writes), clips the range to the file's length
// and counts the bytes read.
//
// Readahead: a read that starts where the handle's previous read ended (not at offset 0)
// continues a sequential stream and doubles the window, from 2 blocks up to 64 MiB; a
// read anywhere else resets it. After each read of a stream the blocks in [end of the
// read, end + window), clipped to the file's length, that were not prefetched yet are
// handed to CachedStore::Prefetch, in steps of at least a block except at the end of the
// file. Prefetching is best effort: a failed map lookup stops it silently, and the store
// only logs failed fetches.
//
// Errors: a failed block read is EIO naming the inode (and logged), after one more try
// when the chunk's map changed meanwhile (its slices replaced by compaction: the old
// blocks may be gone); a failed map lookup keeps the engine's code.
//
// Ownership: the Handle owns its reader. The reader shares the InodeState with the
// inode's other handles and its writer. The Meta (through the InodeState) and the
// CachedStore must outlive it.
//
// Threads: Read may be called from several threads at once (the kernel sends parallel
// reads of one handle). The window is guarded by the reader's own mutex, which is never
// held together with the InodeState's, nor while calling the engine or the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "meta/slice_map.h"

namespace tierfs {

class CachedStore;
class InodeState;
class ReadPieces;

class FileReader {
 public:
  FileReader(std::shared_ptr<InodeState> state, CachedStore* store);
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Fills buf with bytes [off, off+len) of the file as committed, then advances the
  // readahead window. The caller has clipped the range to the file's length.
  // With `pieces`, the bytes are described by pieces in file order instead (windows of
  // cached blocks, and windows of buf for the rest), so that blocks are not copied; buf
  // must still have room for len bytes.
  Status Read(uint64_t off, size_t len, char* buf, ReadPieces* pieces = nullptr);

 private:
  // The chunk whose block read failed, with the map the read used.
  struct FailedChunk {
    bool valid = false;
    uint32_t chunk = 0;
    std::vector<ChunkSegment> segs;
  };
  // Reads [off, off+len) chunk by chunk, zeros where no slice is. A failed block read is
  // EIO naming the inode; `failed` (when given) then says which chunk, with which map.
  Status ReadRange(uint64_t off, size_t len, char* buf, ReadPieces* pieces, FailedChunk* failed);
  // Sequential detection after a read of [off, off+len), and the prefetch it calls for.
  void Readahead(uint64_t off, uint64_t len);

  const std::shared_ptr<InodeState> st_;
  CachedStore* const store_;

  std::mutex mu_;  // guards the window
  uint64_t last_end_ = 0;       // end of the previous read
  uint64_t window_ = 0;         // 0: not a sequential stream
  uint64_t prefetched_to_ = 0;  // prefetch was asked for up to here
};

}  // namespace tierfs
