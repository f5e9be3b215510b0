// ChecksumStore: a wrapper that makes every object self-verifying.
//
// Stored format (all integers big-endian):
//   "TFB1"                  4-byte magic
//   u32 data length         bytes of user data (objects are limited to 4 GiB - 1)
//   u32 segment size        kChecksumSegment (64 KiB); other values are rejected as corrupt
//   u32 checksum[n]         Checksum32 of each segment, n = ceil(length / segment size);
//                           the last segment may be short
//   data
//
// A whole-object Get (off 0, len < 0) costs one inner Get and verifies every segment. A
// ranged Get reads the header (one inner Get of the first 1036 bytes, enough for 16 MiB of
// data, plus one more for larger objects) and then only the segments that cover the range,
// and verifies those; it skips the second read when the first already holds them. Any
// mismatch, a bad header or a short object is EIO naming the key ("object K is corrupt
// (checksum mismatch in segment N)", "object K is truncated (...)"). Errors of the inner
// store (ENOENT for a missing object, ...) are passed through unchanged.
//
// The header itself is not checksummed: a damaged magic or segment size is reported as
// corrupt, a damaged length shows up as a checksum mismatch or a size mismatch (always on a
// whole-object read, on a ranged read when it touches the affected segments).
//
// With table_in_meta (format version 2 volumes on stores with object metadata: S3), the
// object holds the data alone, and the header above, base64, is its metadata
// (ObjectStore::PutWithMeta). An object is then exactly as long as its data, which
// matters to stores that split objects at a size: Ceph's radosgw stores a 4 MiB block plus
// an inline header as two RADOS objects and reads it with two (measured: 487 against 652
// MiB/s of 4 MiB GETs). A Get of any range is one request for the whole 64 KiB segments
// around it; the metadata arrives with it. The segment is 64 KiB up to 16 MiB of data and
// a larger power of two beyond, keeping the table within 256 entries. Multipart uploads
// are refused (EOPNOTSUPP): S3 takes metadata when an upload starts, before any checksum
// is known; TierFS never writes objects that way.
//
// Head and List report data sizes, derived from the stored size (the layout makes the
// mapping invertible), so they cost no extra reads. Head fails with EIO when the stored size
// is impossible for this format; List then reports the stored size unchanged.
//
// Multipart uploads are checksummed too. Part 1 is held in memory until
// CompleteMultipart, which uploads it behind the header (the header needs every
// segment's checksum); the other parts are checksummed and passed to the inner store as
// they come. Hence every part but the last must be a multiple of 64 KiB, and an upload
// does not survive a restart of the process.
//
// Threads: every method may be called from any thread concurrently, if the inner store
// allows that (all stores do).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "object/object_store.h"

namespace tierfs {

// The segment of the checksums ObjectStore::GetVerified hands on: the same by definition.
inline constexpr uint32_t kChecksumSegment = kVerifiedSegment;

class ChecksumStore : public ObjectStore {
 public:
  explicit ChecksumStore(std::unique_ptr<ObjectStore> inner, bool table_in_meta = false);
  ~ChecksumStore() override;
  ChecksumStore(const ChecksumStore&) = delete;
  ChecksumStore& operator=(const ChecksumStore&) = delete;

  // The inner store, for tests that need to reach the stored bytes.
  ObjectStore* inner() const { return inner_.get(); }

  std::string Describe() const override;
  Status Init() override;
  Status Sync() override { return inner_->Sync(); }
  std::optional<StoreSpace> Space() const override { return inner_->Space(); }
  Status Put(const std::string& key, std::string_view data) override;
  Result<std::string> Get(const std::string& key, uint64_t off = 0, int64_t len = -1) override;
  // The table the object was verified against, when its segment is kVerifiedSegment.
  Result<std::string> GetVerified(const std::string& key, std::vector<uint32_t>* sums) override;
  Result<ObjectInfo> Head(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override;
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override;
  Result<std::string> CreateMultipart(const std::string& key) override;
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override;
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override;
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override;

 private:
  struct Part {
    uint64_t size = 0;
    std::vector<uint32_t> checksums;
  };
  struct Upload {
    std::string key;
    std::string first_part;  // data of part 1, uploaded by CompleteMultipart
    std::map<int, Part> parts;
  };

  // sums (when not null): the verified table of a whole-object read (GetVerified).
  Result<std::string> GetWithTableInMeta(const std::string& key, uint64_t off, int64_t len,
                                         std::vector<uint32_t>* sums = nullptr);
  Result<std::string> GetWholeInline(const std::string& key, std::vector<uint32_t>* sums);

  std::unique_ptr<ObjectStore> inner_;
  const bool table_in_meta_;
  std::mutex mu_;
  std::map<std::string, Upload> uploads_;  // by upload id; guarded by mu_
};

}  // namespace tierfs
