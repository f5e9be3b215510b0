#include "object/checksum_store.h"

#include <algorithm>
#include <cerrno>
#include <limits>
#include <optional>

#include <spdlog/spdlog.h>

#include "common/base64.h"
#include "common/encoding.h"
#include "common/hash.h"
#include "common/segment_hasher.h"

namespace tierfs {
namespace {

constexpr char kMagic[] = "TFB1";
constexpr size_t kMagicLen = 4;
constexpr size_t kFixedHeader = 12;  // magic, data length, segment size
// The first read of a ranged Get covers the checksums of this many segments (16 MiB of
// data at 64 KiB), which is every block TierFS writes.
constexpr size_t kProbeSegments = 256;
constexpr size_t kProbeBytes = kFixedHeader + 4 * kProbeSegments;

uint64_t SegmentCount(uint64_t data_len, uint64_t segment = kChecksumSegment) {
  return (data_len + segment - 1) / segment;
}
uint64_t HeaderSize(uint64_t data_len, uint64_t segment = kChecksumSegment) {
  return kFixedHeader + 4 * SegmentCount(data_len, segment);
}
// The metadata layout's segment: 64 KiB for every object up to 16 MiB (all blocks), larger
// powers of two beyond, so that the table never passes kProbeSegments entries and fits in
// the store's metadata (base64 of 1036 bytes: 1384 characters).
uint32_t MetaSegment(uint64_t data_len) {
  uint64_t segment = kChecksumSegment;
  while (SegmentCount(data_len, segment) > kProbeSegments) segment *= 2;
  return static_cast<uint32_t>(segment);
}
uint64_t RoundUp(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

// Inverts stored = HeaderSize(len) + len, which is strictly increasing in len; returns
// nullopt for a stored size that no data length produces.
std::optional<uint64_t> DataSizeOf(uint64_t stored) {
  if (stored < kFixedHeader) return std::nullopt;
  uint64_t x = stored - kFixedHeader;  // = len + 4 * segments
  if (x == 0) return 0;
  uint64_t segments = (x + kChecksumSegment + 4 - 1) / (kChecksumSegment + 4);
  // x falls in the gap just above a whole number of segments, e.g. 12 + 1.
  if (x <= 4 * segments + (segments - 1) * kChecksumSegment) return std::nullopt;
  return x - 4 * segments;
}

Status Corrupt(const std::string& key, const std::string& what) {
  spdlog::warn("object {} is corrupt: {}", key, what);
  return Status::Err(EIO, "object " + key + " is corrupt (" + what + ")");
}

Status Truncated(const std::string& key, uint64_t expected) {
  spdlog::warn("object {} is truncated: expected {} stored bytes", key, expected);
  return Status::Err(EIO, "object " + key + " is truncated (expected " + std::to_string(expected) +
                              " stored bytes, found fewer)");
}

struct Layout {
  uint64_t data_len = 0;
  uint32_t segment = kChecksumSegment;
  uint64_t segments = 0;
  uint64_t header_size = 0;
};

// Parses the fixed header at the start of stored (which may be a prefix of the object).
// The inline layout always uses 64 KiB segments; the metadata layout (any_segment) uses
// MetaSegment's powers of two.
Result<Layout> ParseLayout(const std::string& key, std::string_view stored, bool any_segment = false) {
  if (stored.size() < kFixedHeader) return Truncated(key, kFixedHeader);
  if (stored.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen)) {
    return Corrupt(key, "bad header magic: not a TierFS checksummed object");
  }
  ByteReader r(stored.substr(kMagicLen, 8));
  Layout l;
  l.data_len = r.U32();
  l.segment = r.U32();
  bool ok = any_segment ? l.segment == MetaSegment(l.data_len) : l.segment == kChecksumSegment;
  if (!ok) return Corrupt(key, "unsupported segment size " + std::to_string(l.segment));
  l.segments = SegmentCount(l.data_len, l.segment);
  l.header_size = HeaderSize(l.data_len, l.segment);
  return l;
}

// Checks the segments [first, first + n) whose data is `data` (starting at segment first)
// against the checksum table `sums` (4 bytes per segment, starting at segment 0). `have`:
// the checksums of data's segments when already computed (SegmentHasher), else empty.
Status VerifySegments(const std::string& key, std::string_view sums, uint64_t first, std::string_view data,
                      uint64_t segment = kChecksumSegment, const std::vector<uint32_t>& have = {}) {
  uint64_t seg = first;
  const bool given = !have.empty() && have.size() == (data.size() + segment - 1) / segment;
  while (!data.empty()) {
    std::string_view piece = data.substr(0, segment);
    ByteReader r(sums.substr(4 * seg, 4));
    uint32_t want = r.U32();
    if (!r.ok() || (given ? have[seg - first] : Checksum32(piece)) != want) {
      return Corrupt(key, "checksum mismatch in segment " + std::to_string(seg));
    }
    data.remove_prefix(piece.size());
    ++seg;
  }
  return Status::OK();
}

// The checksum table (4 bytes per segment) as numbers.
void TableOf(std::string_view table, std::vector<uint32_t>* sums) {
  ByteReader r(table);
  sums->resize(table.size() / 4);
  for (uint32_t& v : *sums) v = r.U32();
}

void AppendChecksums(std::string_view data, std::string* out, uint64_t segment = kChecksumSegment) {
  while (!data.empty()) {
    std::string_view piece = data.substr(0, segment);
    PutU32(out, Checksum32(piece));
    data.remove_prefix(piece.size());
  }
}

std::string EncodeFixedHeader(uint64_t data_len, uint32_t segment = kChecksumSegment) {
  std::string h(kMagic, kMagicLen);
  PutU32(&h, static_cast<uint32_t>(data_len));
  PutU32(&h, segment);
  return h;
}

Status TooLarge(const std::string& key, uint64_t size) {
  return Status::Err(EFBIG, "object " + key + " is too large for the checksummed format (" +
                                std::to_string(size) + " bytes, at most 4 GiB - 1)");
}

Status UploadNotFound(const std::string& key, const std::string& upload_id) {
  return Status::Err(ENOENT, "multipart upload " + upload_id + " of object " + key +
                                 " not found (already completed or aborted, or started before a restart)");
}

// The metadata layout's table, from the object's metadata: the inline header's bytes,
// base64.
Result<Layout> ParseMetaHeader(const std::string& key, const std::string& meta, std::string* header) {
  if (meta.empty()) {
    return Corrupt(key, "no checksum table in its metadata: not written by TierFS into this volume");
  }
  std::optional<std::string> h = Base64Decode(meta);
  if (!h) return Corrupt(key, "its checksum table is not base64");
  ASSIGN_OR_RETURN(Layout l, ParseLayout(key, *h, /*any_segment=*/true));
  if (h->size() != l.header_size) return Corrupt(key, "its checksum table has the wrong length");
  *header = std::move(*h);
  return l;
}

}  // namespace

ChecksumStore::ChecksumStore(std::unique_ptr<ObjectStore> inner, bool table_in_meta)
    : inner_(std::move(inner)), table_in_meta_(table_in_meta) {}

ChecksumStore::~ChecksumStore() = default;

std::string ChecksumStore::Describe() const { return inner_->Describe(); }

Status ChecksumStore::Init() { return inner_->Init(); }

Status ChecksumStore::Put(const std::string& key, std::string_view data) {
  if (data.size() > std::numeric_limits<uint32_t>::max()) return TooLarge(key, data.size());
  uint32_t segment = table_in_meta_ ? MetaSegment(data.size()) : kChecksumSegment;
  std::string header = EncodeFixedHeader(data.size(), segment);
  header.reserve(HeaderSize(data.size(), segment));
  AppendChecksums(data, &header, segment);
  if (table_in_meta_) return inner_->PutWithMeta(key, data, Base64Encode(header));
  return inner_->PutParts(key, {header, data});
}

Result<std::string> ChecksumStore::GetWithTableInMeta(const std::string& key, uint64_t off, int64_t len,
                                                      std::vector<uint32_t>* sums) {
  if (len == 0) return inner_->Get(key, off, 0);  // reports a missing object
  // Whole 64 KiB segments around the range, the segment of every object up to 16 MiB:
  // one request carries the data and, in its metadata, the table to check it against.
  uint64_t begin = off / kChecksumSegment * kChecksumSegment;
  int64_t n = len < 0 ? -1 : static_cast<int64_t>(RoundUp(off + static_cast<uint64_t>(len), kChecksumSegment) - begin);
  std::string meta, header;
  // The body of a request from a segment boundary is hashed as it arrives, in 64 KiB
  // segments: those of every object up to 16 MiB (larger ones are hashed below).
  SegmentHasher hasher(kChecksumSegment);
  ASSIGN_OR_RETURN(std::string got, inner_->GetWithMeta(key, begin, n, &meta));
  if (meta.empty() && got.empty()) {
    // A range past the end (of an empty object, too) may come back without the object's
    // metadata (HTTP 416).
    ASSIGN_OR_RETURN(ObjectInfo info, inner_->Head(key));
    if (begin >= info.size) return std::string();
  }
  ASSIGN_OR_RETURN(Layout l, ParseMetaHeader(key, meta, &header));
  if (off >= l.data_len) return std::string();
  if (begin % l.segment != 0 || (n >= 0 && (begin + n) % l.segment != 0 && begin + n < l.data_len)) {
    // A larger object, whose segments are larger: read whole ones of those (rare; blocks
    // never need it).
    begin = off / l.segment * l.segment;
    n = len < 0 ? -1 : static_cast<int64_t>(RoundUp(off + static_cast<uint64_t>(len), l.segment) - begin);
    ASSIGN_OR_RETURN(got, inner_->GetWithMeta(key, begin, n, &meta));
    ASSIGN_OR_RETURN(l, ParseMetaHeader(key, meta, &header));
  }
  uint64_t avail_end = n < 0 ? l.data_len : std::min<uint64_t>(l.data_len, begin + static_cast<uint64_t>(n));
  uint64_t want = avail_end > begin ? avail_end - begin : 0;
  if (got.size() < want) return Truncated(key, avail_end);
  if (got.size() > want) return Corrupt(key, "holds bytes past the length its checksum table gives");
  RETURN_IF_ERROR(VerifySegments(key, std::string_view(header).substr(kFixedHeader), begin / l.segment, got, l.segment,
                                 l.segment == kChecksumSegment ? hasher.Sums(got) : std::vector<uint32_t>()));
  if (sums != nullptr && begin == 0 && n < 0 && l.segment == kVerifiedSegment) {
    TableOf(std::string_view(header).substr(kFixedHeader), sums);
  }
  uint64_t end = len < 0 ? l.data_len : std::min<uint64_t>(l.data_len, off + static_cast<uint64_t>(len));
  if (begin == off && end == avail_end) return got;  // the whole object, or an aligned range: no copy
  return got.substr(off - begin, end - off);
}

Result<std::string> ChecksumStore::GetWholeInline(const std::string& key, std::vector<uint32_t>* sums) {
  ASSIGN_OR_RETURN(std::string stored, inner_->Get(key));
  ASSIGN_OR_RETURN(Layout l, ParseLayout(key, stored));
  uint64_t want = l.header_size + l.data_len;
  if (stored.size() < want) return Truncated(key, want);
  if (stored.size() > want) {
    return Corrupt(key, std::to_string(stored.size() - want) + " unexpected bytes after the data");
  }
  std::string_view view(stored);
  RETURN_IF_ERROR(VerifySegments(key, view.substr(kFixedHeader, 4 * l.segments), 0, view.substr(l.header_size)));
  if (sums != nullptr) TableOf(view.substr(kFixedHeader, 4 * l.segments), sums);
  stored.erase(0, l.header_size);
  return stored;
}

Result<std::string> ChecksumStore::GetVerified(const std::string& key, std::vector<uint32_t>* sums) {
  sums->clear();
  if (table_in_meta_) return GetWithTableInMeta(key, 0, -1, sums);
  return GetWholeInline(key, sums);
}

Result<std::string> ChecksumStore::Get(const std::string& key, uint64_t off, int64_t len) {
  if (table_in_meta_) return GetWithTableInMeta(key, off, len);
  if (off == 0 && len < 0) return GetWholeInline(key, nullptr);

  ASSIGN_OR_RETURN(std::string probe, inner_->Get(key, 0, kProbeBytes));
  ASSIGN_OR_RETURN(Layout l, ParseLayout(key, probe));
  if (probe.size() < kProbeBytes) {
    // The probe returned the whole object, so its size can be checked.
    uint64_t want = l.header_size + l.data_len;
    if (probe.size() < want) return Truncated(key, want);
    if (probe.size() > want) {
      return Corrupt(key, std::to_string(probe.size() - want) + " unexpected bytes after the data");
    }
  }
  std::string sums = probe.substr(kFixedHeader, 4 * l.segments);
  if (l.segments > kProbeSegments) {
    uint64_t rest = 4 * (l.segments - kProbeSegments);
    ASSIGN_OR_RETURN(std::string more, inner_->Get(key, kProbeBytes, static_cast<int64_t>(rest)));
    if (more.size() < rest) return Truncated(key, l.header_size);
    sums += more;
  }
  if (off >= l.data_len || len == 0) return std::string();
  uint64_t end = l.data_len;
  if (len > 0) end = std::min<uint64_t>(end, off + static_cast<uint64_t>(len));
  uint64_t first = off / kChecksumSegment;
  uint64_t seg_begin = first * kChecksumSegment;
  uint64_t seg_end = std::min<uint64_t>(l.data_len, ((end - 1) / kChecksumSegment + 1) * kChecksumSegment);
  uint64_t stored_begin = l.header_size + seg_begin;
  uint64_t stored_len = seg_end - seg_begin;

  std::string fetched;
  std::string_view segments;
  if (probe.size() >= stored_begin + stored_len) {
    segments = std::string_view(probe).substr(stored_begin, stored_len);
  } else {
    ASSIGN_OR_RETURN(fetched, inner_->Get(key, stored_begin, static_cast<int64_t>(stored_len)));
    if (fetched.size() < stored_len) return Truncated(key, stored_begin + stored_len);
    segments = fetched;
  }
  RETURN_IF_ERROR(VerifySegments(key, sums, first, segments));
  return std::string(segments.substr(off - seg_begin, end - off));
}

Result<ObjectInfo> ChecksumStore::Head(const std::string& key) {
  ASSIGN_OR_RETURN(ObjectInfo info, inner_->Head(key));
  if (table_in_meta_) return info;  // the object is its data
  std::optional<uint64_t> size = DataSizeOf(info.size);
  if (!size) {
    return Corrupt(key, "stored size " + std::to_string(info.size) + " does not fit the checksummed layout");
  }
  info.size = *size;
  return info;
}

Status ChecksumStore::Delete(const std::string& key) { return inner_->Delete(key); }

Result<std::vector<ObjectInfo>> ChecksumStore::List(const std::string& prefix, const std::string& start_after,
                                                    size_t limit) {
  ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, inner_->List(prefix, start_after, limit));
  if (table_in_meta_) return objects;
  for (ObjectInfo& info : objects) {
    if (std::optional<uint64_t> size = DataSizeOf(info.size)) info.size = *size;
  }
  return objects;
}

Result<LevelPage> ChecksumStore::ListLevel(const std::string& prefix, const std::string& token) {
  ASSIGN_OR_RETURN(LevelPage page, inner_->ListLevel(prefix, token));
  if (table_in_meta_) return page;
  for (ObjectInfo& info : page.objects) {
    if (std::optional<uint64_t> size = DataSizeOf(info.size)) info.size = *size;
  }
  return page;
}

Result<std::string> ChecksumStore::CreateMultipart(const std::string& key) {
  if (table_in_meta_) {
    // S3 takes an object's metadata when the upload starts, before any checksum is known.
    return Status::Err(EOPNOTSUPP, "cannot start a multipart upload of object " + key +
                                       ": this volume keeps checksum tables in object metadata (format version 2), "
                                       "which multipart uploads cannot carry");
  }
  ASSIGN_OR_RETURN(std::string id, inner_->CreateMultipart(key));
  std::lock_guard<std::mutex> lock(mu_);
  uploads_[id].key = key;
  return id;
}

Status ChecksumStore::UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                                 std::string_view data) {
  if (part_num < 1) {
    return Status::Err(EINVAL, "invalid part number " + std::to_string(part_num) + " for object " + key +
                                   ": parts are numbered from 1");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = uploads_.find(upload_id);
    if (it == uploads_.end() || it->second.key != key) return UploadNotFound(key, upload_id);
  }
  Part part;
  part.size = data.size();
  std::string sums;
  AppendChecksums(data, &sums);
  ByteReader r(sums);
  while (!r.empty()) part.checksums.push_back(r.U32());
  // Part 1 goes behind the header, which can only be written once all checksums are known.
  if (part_num != 1) RETURN_IF_ERROR(inner_->UploadPart(key, upload_id, part_num, data));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = uploads_.find(upload_id);
  if (it == uploads_.end() || it->second.key != key) return UploadNotFound(key, upload_id);
  if (part_num == 1) it->second.first_part.assign(data);
  it->second.parts[part_num] = std::move(part);
  return Status::OK();
}

Status ChecksumStore::CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) {
  if (parts < 1) {
    return Status::Err(EINVAL, "cannot complete multipart upload of object " + key + " with " +
                                   std::to_string(parts) + " parts");
  }
  std::string first;  // header + data of part 1
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = uploads_.find(upload_id);
    if (it == uploads_.end() || it->second.key != key) return UploadNotFound(key, upload_id);
    const Upload& up = it->second;
    uint64_t total = 0;
    for (int n = 1; n <= parts; ++n) {
      auto p = up.parts.find(n);
      if (p == up.parts.end()) {
        return Status::Err(EINVAL, "part " + std::to_string(n) + " of multipart upload " + upload_id +
                                       " of object " + key + " was never uploaded");
      }
      if (n < parts && p->second.size % kChecksumSegment != 0) {
        return Status::Err(EINVAL, "part " + std::to_string(n) + " of multipart upload of object " + key + " is " +
                                       std::to_string(p->second.size) +
                                       " bytes; every part but the last must be a multiple of 64 KiB");
      }
      total += p->second.size;
    }
    if (total > std::numeric_limits<uint32_t>::max()) return TooLarge(key, total);
    first = EncodeFixedHeader(total);
    first.reserve(HeaderSize(total) + up.first_part.size());
    for (int n = 1; n <= parts; ++n) {
      for (uint32_t sum : up.parts.at(n).checksums) PutU32(&first, sum);
    }
    first += up.first_part;
  }
  RETURN_IF_ERROR(inner_->UploadPart(key, upload_id, 1, first));
  RETURN_IF_ERROR(inner_->CompleteMultipart(key, upload_id, parts));
  std::lock_guard<std::mutex> lock(mu_);
  uploads_.erase(upload_id);
  return Status::OK();
}

Status ChecksumStore::AbortMultipart(const std::string& key, const std::string& upload_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = uploads_.find(upload_id);
    if (it != uploads_.end() && it->second.key == key) uploads_.erase(it);
  }
  return inner_->AbortMultipart(key, upload_id);
}

}  // namespace tierfs
