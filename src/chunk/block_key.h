// Object keys of slice blocks, and the arithmetic that cuts a slice into blocks.
//
// On-storage format (DESIGN.md section 2): block `index` of slice `id`, holding `len` bytes,
// is stored under
//
//   VOLUME/chunks/HH/ID_INDEX_LEN
//
// where ID, INDEX and LEN are decimal without leading zeros and HH is two lowercase hex
// digits of Hash64(decimal ID) % 256. The fan-out spreads consecutive slice ids over 256
// prefixes so that no object-store prefix gets hot. The length is part of the key so that a
// reader knows the expected object size (a short object is corrupt) and a garbage collector
// can account space from a listing alone.
//
// Every function here is pure and may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tierfs {

std::string BlockKey(const std::string& volume, uint64_t slice_id, uint32_t index, uint32_t len);

// Inverse of BlockKey. Accepts only keys that BlockKey produces byte for byte (canonical
// decimals, matching fan-out digits, non-empty volume, len > 0); returns false otherwise and
// leaves the outputs unspecified.
bool ParseBlockKey(std::string_view key, std::string* volume, uint64_t* id, uint32_t* index, uint32_t* len);

// Pack objects (small-file packing, chunk/writeback.h): many small slices in one object,
// under
//
//   VOLUME/packs/HH/ID_LEN
//
// with ID a pack id (drawn from the slice id counter, so it never equals a slice id), LEN
// the object's length and HH the fan-out of ID as for blocks. Where each member sits is in
// metadata ("PL" keys), never in the object.
std::string PackKey(const std::string& volume, uint64_t pack_id, uint32_t len);
bool ParsePackKey(std::string_view key, std::string* volume, uint64_t* pack_id, uint32_t* len);

// The cache key of a packed slice (its only block): PackKey + "@" + OFFSET, the slice's
// first byte in the pack. Cached, fetched (a ranged get of the pack) and asked from cache
// group members like a block key. A member moved to another pack gets another key.
std::string PackedBlockKey(const std::string& volume, uint64_t pack_id, uint32_t pack_len, uint32_t off);
// Splits a PackedBlockKey into the pack's object key and the offset; false for any other key.
bool ParsePackedBlockKey(std::string_view key, std::string* pack_key, uint32_t* off);

// A piece of a byte range that falls inside one block.
struct BlockSpan {
  uint32_t index = 0;            // block index within the slice
  uint32_t offset_in_block = 0;  // first byte of the piece, relative to the block
  uint32_t len = 0;              // bytes of the piece (> 0)
  bool operator==(const BlockSpan&) const = default;
};

// Number of blocks of a slice of `size` bytes (0 for an empty slice). block_size > 0.
uint32_t BlockCount(uint32_t size, uint32_t block_size);

// Length of block `index` of a slice of `size` bytes: block_size for every block but the
// last, which holds the remainder. 0 when index is past the last block.
uint32_t BlockLength(uint32_t size, uint32_t block_size, uint32_t index);

// The pieces, in ascending order, covering bytes [off, off+len) of a slice of `size` bytes.
// The range is clipped to the slice: bytes at or past `size` produce no span.
std::vector<BlockSpan> BlockSpans(uint32_t size, uint32_t block_size, uint32_t off, uint32_t len);

}  // namespace tierfs
