#include "chunk/cache_file.h"

#include <algorithm>
#include <cstring>

#include "common/encoding.h"
#include "common/hash.h"

namespace tierfs {

namespace {
constexpr std::string_view kMagic = "TFSBLK01";
uint32_t SegmentCount(uint32_t len, uint32_t seg) { return (len + seg - 1) / seg; }
}  // namespace

std::string EncodeCacheHeader(std::string_view key, std::string_view data, const std::vector<uint32_t>* sums) {
  uint32_t n = SegmentCount(static_cast<uint32_t>(data.size()), kCacheSegment);
  uint32_t header_len = static_cast<uint32_t>(kMagic.size() + 4 * 3 + 4 + key.size() + 4 * n + 4);
  std::string h;
  h.reserve(header_len);
  h.append(kMagic);
  PutU32(&h, header_len);
  PutU32(&h, static_cast<uint32_t>(data.size()));
  PutU32(&h, kCacheSegment);
  PutStr(&h, key);
  const bool given = sums != nullptr && sums->size() == n;
  for (uint32_t i = 0; i < n; ++i) {
    PutU32(&h, given ? (*sums)[i] : Checksum32(data.substr(static_cast<size_t>(i) * kCacheSegment, kCacheSegment)));
  }
  PutU32(&h, Checksum32(h));
  return h;
}

bool ParseCacheHeader(std::string_view buf, CacheHeader* out, uint32_t* need) {
  if (need) *need = 0;
  if (buf.size() < kMagic.size() + 4 || buf.substr(0, kMagic.size()) != kMagic) return false;
  ByteReader lenr(buf.substr(kMagic.size(), 4));
  uint32_t header_len = lenr.U32();
  if (header_len < kMagic.size() + 20 || header_len > (16u << 20)) return false;
  if (buf.size() < header_len) {
    if (need) *need = header_len;
    return false;
  }
  std::string_view hdr = buf.substr(0, header_len);
  ByteReader crcr(hdr.substr(header_len - 4));
  if (crcr.U32() != Checksum32(hdr.substr(0, header_len - 4))) return false;
  ByteReader r(hdr.substr(kMagic.size() + 4, header_len - kMagic.size() - 8));
  out->header_len = header_len;
  out->data_len = r.U32();
  out->segment = r.U32();
  out->key = std::string(r.Str());
  if (!r.ok() || out->segment == 0) return false;
  uint32_t n = SegmentCount(out->data_len, out->segment);
  out->crcs.resize(n);
  for (uint32_t i = 0; i < n; ++i) out->crcs[i] = r.U32();
  return r.ok();
}

bool VerifyCacheRange(const CacheHeader& h, uint64_t from, std::initializer_list<std::string_view> pieces) {
  if (from % h.segment != 0) return false;
  uint64_t total = 0;
  for (std::string_view p : pieces) total += p.size();
  // Walk the segments; each is checksummed over the (at most three) pieces it overlaps.
  for (uint64_t s = 0; s < total; s += h.segment) {
    uint64_t idx = (from + s) / h.segment;
    if (idx >= h.crcs.size()) return false;
    uint64_t e = std::min<uint64_t>(total, s + h.segment);
    std::string_view parts[3];
    size_t n = 0;
    uint64_t base = 0;
    for (std::string_view p : pieces) {
      uint64_t ps = base, pe = base + p.size();
      base = pe;
      uint64_t lo = std::max(ps, s), hi = std::min(pe, e);
      if (lo >= hi) continue;
      if (n == 3) return false;
      parts[n++] = p.substr(lo - ps, hi - lo);
    }
    std::string_view a = n > 0 ? parts[0] : std::string_view(), b = n > 1 ? parts[1] : std::string_view(),
                     c = n > 2 ? parts[2] : std::string_view();
    if (Checksum32({a, b, c}) != h.crcs[idx]) return false;
  }
  return true;
}

}  // namespace tierfs
