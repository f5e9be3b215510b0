// The cache group's wire format (docs/cache-group.md): one HTTP/1.1 request per block.
//
//   GET /tierfs/v1/block?key=<key, percent-encoded>&len=<block length>
//   X-Tierfs-Volume: <volume uuid>
//   X-Tierfs-Time:   <unix seconds of the request>
//   X-Tierfs-Mac:    hex HMAC-SHA256(group secret, "req\n" volume "\n" key "\n" len "\n" time)
//
// A member answers 200 with the body
//   <checksum table: 4 bytes (big-endian) per 64 KiB segment> <the block's bytes>
// and X-Tierfs-Mac: hex HMAC-SHA256(group secret, "rep\n" key "\n" len "\n" table).
// The table holds the same values as the object's own checksum table in the store (the
// low 32 bits of XXH3-64 per 64 KiB segment, object/checksum_store.h), so the receiver
// checks the bytes it got against the object's checksums; the MAC binds the table to the
// group secret and to the block asked for.
//
// Refusals: 403 (bad or stale MAC, another volume), 400 (malformed), 404 (not a block of
// this volume or missing from the store), 503 (the member could not fetch it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tierfs::group {

inline constexpr char kBlockPath[] = "/tierfs/v1/block";
inline constexpr char kVolumeHeader[] = "X-Tierfs-Volume";
inline constexpr char kTimeHeader[] = "X-Tierfs-Time";
inline constexpr char kMacHeader[] = "X-Tierfs-Mac";
// A request whose time is further than this from the receiver's clock is refused, so a
// captured request cannot be replayed later.
inline constexpr int64_t kMaxClockSkewS = 300;

std::string RequestMac(std::string_view secret, std::string_view volume, std::string_view key, uint32_t len,
                       int64_t time_s);
std::string ReplyMac(std::string_view secret, std::string_view key, uint32_t len, std::string_view table);

// The checksum table of a block (4 bytes per 64 KiB segment).
std::string ChecksumTable(std::string_view data);
size_t TableSize(uint32_t len);

// Checks a reply body for the block (key, len): the MAC over the table, then every
// segment. On success *data is the block's bytes (a view into body). EIO names what was
// wrong.
Status VerifyReply(std::string_view secret, std::string_view key, uint32_t len, std::string_view mac_hex,
                   std::string_view body, std::string_view* data);

// Constant-time comparison of two MACs (hex).
bool SameMac(std::string_view a, std::string_view b);

}  // namespace tierfs::group
