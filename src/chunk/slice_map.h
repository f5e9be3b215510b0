// The slice map: what a chunk's records resolve to after shadowing.
//
// Pure functions, callable from any thread.
#pragma once

#include <cstdint>
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
  bool operator==(const ChunkSegment&) const = default;
};

// Applies records in ascending seq (ties keep their input order); later records shadow
// earlier ones over [pos, pos+len). The result is non-overlapping, sorted by pos, and
// covers exactly the union of the written ranges: uncovered gaps are omitted and read as
// zeros. Records with id 0 (holes, e.g. from truncate) are kept as id-0 segments. Records
// with len 0 are ignored; a record reaching past kChunkSize is clipped to the chunk.
// O(n log n) in the record count.
std::vector<ChunkSegment> BuildSliceMap(std::vector<SliceRecord> records);

// The pieces of `segments` (as returned by BuildSliceMap) that overlap [pos, pos+len),
// clipped to that range, with off adjusted accordingly. Gaps are not filled.
std::vector<ChunkSegment> Slice(const std::vector<ChunkSegment>& segments, uint32_t pos, uint32_t len);

}  // namespace tierfs
