// The slice map: what a chunk's records resolve to after shadowing.
//
// Pure functions, callable from any thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "meta/types.h"

namespace tierfs {

// Bytes [pos, pos+len) of the chunk come from bytes [off, off+len) of slice `id`, which is
// `size` bytes long. id 0 means the range reads as zeros.
struct ChunkSegment {
  uint32_t pos = 0;
  uint32_t len = 0;
  uint64_t id = 0;
  uint32_t size = 0;
  uint32_t off = 0;
  // Packed slices: bytes [pack_off, pack_off+size) of pack object `pack` (SliceRecord).
  uint64_t pack = 0;
  uint32_t pack_len = 0;
  uint32_t pack_off = 0;
  uint8_t flags = 0;  // SliceRecord::flags
  bool operator==(const ChunkSegment&) const = default;
};

// Applies records in ascending seq (ties keep their input order); later records shadow
// earlier ones over [pos, pos+len). The result is non-overlapping, sorted by pos, and
// covers exactly the union of the written ranges: uncovered gaps are omitted and read as
// zeros. Records with id 0 (holes, e.g. from truncate) are kept as id-0 segments. Records
// with len 0 are ignored; a record reaching past kChunkSize is clipped to the chunk.
// O(n log n) in the record count.
std::vector<ChunkSegment> BuildSliceMap(std::vector<SliceRecord> records);

// A record or segment with id 0 reads as zeros. With size kUnwrittenSize it is an
// allocated range (fallocate, zero range: ext4's unwritten extents): counted in st_blocks,
// a hole for SEEK_DATA. With size 0 it is a hole.
constexpr uint32_t kUnwrittenSize = 1;
inline bool IsAllocated(const ChunkSegment& s) { return s.id != 0 || s.size == kUnwrittenSize; }

// Bytes of [pos, pos+len) that are allocated (data or unwritten zeros) in `segments`.
uint64_t AllocatedBytes(const std::vector<ChunkSegment>& segments, uint32_t pos, uint32_t len);

// The sub-ranges of [pos, end) that are not allocated (holes and gaps), in order.
std::vector<std::pair<uint32_t, uint32_t>> Unallocated(const std::vector<ChunkSegment>& segments, uint32_t pos,
                                                       uint32_t end);

// SEEK_DATA / SEEK_HOLE inside one chunk: the first offset in [pos, end) that holds data
// (want_data) or is a hole (an id-0 segment or a gap); `end` when there is none.
uint64_t NextData(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, bool want_data);

// NextData in blocks of `unit` bytes (a power of two dividing kChunkSize; 4 KiB, as ext4
// and st_blocks count): a block holding any data byte is data throughout. SEEK_DATA gives
// pos when pos's block holds data, else the start of the next block that does; SEEK_HOLE
// gives pos when pos's block holds none, else the start of the next block without data
// (`end` when there is none: the last block may be cut by the end of the file).
uint64_t NextDataBlock(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, bool want_data,
                       uint64_t unit);
// Blocks of `unit` bytes that hold an allocated byte (IsAllocated) inside [pos, end).
uint64_t AllocatedBlocks(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, uint64_t unit);
// Blocks left without an allocated byte when [pos, end) becomes a hole: those the range
// has allocated bytes in, except edge blocks that also hold allocated bytes outside it.
uint64_t BlocksFreedByPunch(const std::vector<ChunkSegment>& segments, uint64_t pos, uint64_t end, uint64_t unit);

// The pieces of `segments` (as returned by BuildSliceMap) that overlap [pos, pos+len),
// clipped to that range, with off adjusted accordingly. Gaps are not filled.
std::vector<ChunkSegment> Slice(const std::vector<ChunkSegment>& segments, uint32_t pos, uint32_t len);

}  // namespace tierfs
