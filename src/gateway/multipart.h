// Multipart uploads on the volume. An upload is a directory ROOT/.tierfs-gateway/uploads/ID
// (ID: 32 random hex digits) made by its initiator, with the key, the bucket, the object's
// metadata and the time it began in the directory's xattr trusted.tierfs.s3upload (JSON).
// Each part is a file of it named by its number (00001 ... 10000), written like a PUT's
// staged file and renamed into place (so a part uploaded again replaces the old one
// whole), its ETag (MD5) in the part's trusted.tierfs.s3 xattr.
//
// Complete checks the list the client sends (InvalidPartOrder, InvalidPart, EntityTooSmall
// as S3 answers them), then shares every part's slices into one staged file in order
// (Vfs::CopyFileRange: no byte is copied or read) and publishes it like a PUT: one
// conditional rename, so the object appears whole or not at all. The upload's directory
// goes with its parts. Uploads older than a configured age are removed by CleanOlderThan.
//
// Threads: any method from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gateway/objects.h"

namespace tierfs::gateway {

inline constexpr char kUploadXattr[] = "trusted.tierfs.s3upload";
inline constexpr int kMaxParts = 10000;
inline constexpr uint64_t kMinPartSize = 5ull << 20;  // every part but the last

class Multipart {
 public:
  struct Upload {
    std::string id, key;
    Ino bucket = 0;
    Ino dir = 0;  // the upload's directory
    uint32_t owner = 0;
    int64_t initiated_ns = 0;
    ObjectMeta meta;
  };
  struct Part {
    int number = 0;
    uint64_t size = 0;
    std::string etag;  // hex MD5, no quotes
    int64_t mtime_ns = 0;
  };

  explicit Multipart(Objects* objects) : o_(objects) {}

  S3Result<Upload> Create(const Caller& c, Ino bucket, const std::string& key, ObjectMeta meta);
  // The upload `id` of key in bucket (NoSuchUpload when there is none, or it is another key's).
  S3Result<Upload> Find(const Caller& c, Ino bucket, const std::string& key, const std::string& id);
  S3Result<std::unique_ptr<Objects::PutStream>> BeginPart(const Caller& c, const Upload& u);
  S3Result<Part> FinishPart(const Caller& c, const Upload& u, int number, std::unique_ptr<Objects::PutStream> put);
  // UploadPartCopy: bytes [off, off+len) of src shared into part `number` (no data copied).
  S3Result<Part> CopyPart(const Caller& c, const Upload& u, int number, const ObjectInfo& src, uint64_t off,
                          uint64_t len);
  // The parts uploaded so far, by number.
  S3Result<std::vector<Part>> Parts(const Caller& c, const Upload& u);
  // The uploads in progress in bucket, by key then initiation time.
  S3Result<std::vector<Upload>> List(const Caller& c, Ino bucket);
  // parts: (number, etag) as the client lists them.
  S3Result<ObjectInfo> Complete(const Caller& c, const Upload& u, const std::vector<std::pair<int, std::string>>& parts,
                                const WriteCondition& cond);
  S3Result<bool> Abort(const Caller& c, const Upload& u);
  // Removes uploads begun more than max_age_ns ago; returns how many.
  size_t CleanOlderThan(int64_t max_age_ns);

 private:
  S3Result<bool> RemoveUpload(const Ctx& ctx, const Upload& u);
  Objects* o_;
};

std::string PartName(int number);

}  // namespace tierfs::gateway
