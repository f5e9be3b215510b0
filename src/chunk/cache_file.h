// The format of one block in the disk cache: a header, then the block's bytes.
//
//   "TFSBLK01"            magic, 8 bytes
//   u32 header_len        bytes before the data, this field's record included
//   u32 data_len          the block's length
//   u32 segment           checksum granularity (64 KiB)
//   str key               the block's object key (u32 length + bytes)
//   u32 crc[n]            Checksum32 of each segment of the data, n = ceil(data_len/segment)
//   u32 header_crc        Checksum32 of everything above
//
// Integers are big-endian (common/encoding.h). Per-segment checksums let a small read
// verify only the segments it touches instead of the whole block. The key in the header
// guards against a fingerprint collision and against a file put in the wrong place.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tierfs {

constexpr uint32_t kCacheSegment = 64 << 10;
// Enough to hold the header of any block up to 64 MiB with a key of up to ~1 KiB: readers
// read this much first and only read again for larger headers.
constexpr uint32_t kCacheHeaderProbe = 8192;

struct CacheHeader {
  uint32_t header_len = 0;
  uint32_t data_len = 0;
  uint32_t segment = kCacheSegment;
  std::string key;
  std::vector<uint32_t> crcs;
};

// sums: the Checksum32 of each segment when the caller has them already (verified against
// the object store's table, ObjectStore::GetVerified); computed here when null or of
// another count.
std::string EncodeCacheHeader(std::string_view key, std::string_view data, const std::vector<uint32_t>* sums = nullptr);

// Parses a header from the start of `buf`. Returns false when it is damaged or `buf` is too
// short; *need (when given) is then the length the header claims, so that a caller can read
// that much and try again (0 when even that is unknown or impossible).
bool ParseCacheHeader(std::string_view buf, CacheHeader* out, uint32_t* need = nullptr);

// Whether the data bytes [from, from + total size of the pieces), given as consecutive
// pieces, match their checksums. `from` is a segment boundary and the range ends at one or
// at the end of the data.
bool VerifyCacheRange(const CacheHeader& h, uint64_t from, std::initializer_list<std::string_view> pieces);

}  // namespace tierfs
