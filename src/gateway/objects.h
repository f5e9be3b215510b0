// The volume as S3 sees it: buckets, and objects that are files (keys ending in "/":
// directories), read and written through the vfs as the caller's mapped user, so the
// volume's permissions, quotas, trash and write path apply as on a mount.
//
// Buckets: by default one, named after the volume, whose directory is the served root
// (`--subdir`); with multi_buckets each top-level directory is a bucket.
//
// Writes are never seen half done: a PUT writes a file in the staging area
// (ROOT/.tierfs-gateway/tmp, sticky and unlistable) and publishes it with one rename that
// also sets its S3 metadata (object_meta.h) and decides any condition (If-None-Match: *,
// If-Match) in the same metadata transaction, so of two racing conditional writers exactly
// one wins. Parent directories a key needs are made on the way and marked as the
// gateway's ("implicit"); deleting the last object below one removes it again, never a
// directory made through a mount. An overwritten or deleted object goes to the trash like
// any removed file.
//
// Threads: every method may be called from any thread; a PutStream by one at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/checksums.h"
#include "gateway/keys.h"
#include "gateway/object_meta.h"
#include "gateway/s3_error.h"
#include "meta/meta.h"

namespace tierfs {
class Vfs;
}

namespace tierfs::gateway {

// A caller as the volume sees it.
struct Caller {
  Ctx ctx;
  std::string access_key;  // "" anonymous
  bool read_only = false;
};

struct ObjectInfo {
  Ino ino = 0;
  Ino parent = 0;
  Attr attr;
  ObjectMeta meta;
  bool dir = false;
};

// Preconditions of a write, decided when it is published.
struct WriteCondition {
  bool if_none_match_any = false;       // If-None-Match: *
  std::optional<std::string> if_match;  // If-Match: ETAG (without quotes; "*": exists)
};

class Objects {
 public:
  struct Options {
    Ino root = kRootIno;
    bool multi_buckets = false;
    std::string volume_name;  // the bucket's name without multi_buckets
    // Files bigger than this get an ETag that is not their MD5 (a hash of identity and
    // version, with a "-1" suffix as multipart ETags have) when first asked for one: reading
    // them whole on a HEAD would take minutes.
    uint64_t etag_max_read = 16ull << 30;
  };
  Objects(Vfs* vfs, Options opts);

  // Makes the staging area (as root): ROOT/.tierfs-gateway/{tmp,uploads}, mode 1733.
  S3Result<bool> Init();

  // ---- buckets ----
  S3Result<Ino> Bucket(const Caller& c, const std::string& name);
  struct BucketInfo {
    std::string name;
    int64_t created_ns = 0;
  };
  S3Result<std::vector<BucketInfo>> Buckets(const Caller& c);
  S3Result<bool> CreateBucket(const Caller& c, const std::string& name);
  S3Result<bool> DeleteBucket(const Caller& c, const std::string& name);

  // ---- reading ----
  // The object at key: a regular file, or for "a/b/" a directory. Its ETag is brought up to
  // date first when the file changed since it was computed (a write through a mount).
  S3Result<ObjectInfo> Head(const Caller& c, Ino bucket, const std::string& key);
  // Computes and stores the ETag of a file whose stored one is missing or stale (written
  // through a mount): its MD5, read once, then kept until the file changes.
  S3Result<bool> EnsureEtag(const Caller& c, ObjectInfo* info);
  // An ETag from a file's identity and version, read from nothing: what a listing gives a
  // file that has no MD5 yet (listing a million files written through a mount must not
  // read them all), and what a file over etag_max_read keeps. Its "-1" says it is no MD5
  // of the bytes (rclone and awscli then compare sizes and times instead); an empty
  // file's is the MD5 of nothing.
  static std::string IdentityEtag(const ObjectInfo& info);
  // Opens an object's file for reading as the caller; the handle's data through ReadAt.
  S3Result<uint64_t> OpenRead(const Caller& c, Ino ino);
  S3Result<size_t> ReadAt(uint64_t fh, uint64_t off, size_t n, char* buf);
  void Close(uint64_t fh);

  // ---- writing ----
  class PutStream {
   public:
    ~PutStream();
    // The next bytes of the body. They are not hashed here: the reader of the body already
    // computes its MD5 (with the signature's SHA256 and any checksum) and gives it with
    // SetMd5 (hashing twice cost 1.5 CPU s per GiB).
    std::optional<S3Error> Write(std::string_view data);
    uint64_t size() const { return off_; }
    void SetMd5(std::string md5_hex) { md5_given_ = std::move(md5_hex); }
    const std::string& Md5Hex() const { return md5_given_; }
    const std::string& name() const { return name_; }
    uint64_t fh() const { return fh_; }
    // Data placed in the file by other means (UploadPartCopy shares slices into it): its
    // size and MD5, for what follows.
    void SetWritten(uint64_t size, std::string md5_hex) {
      off_ = size;
      md5_given_ = std::move(md5_hex);
    }

   private:
    friend class Objects;
    PutStream(Objects* o, Caller c, Ino staging, std::string name, uint64_t fh);
    std::optional<S3Error> FlushBuf();
    Objects* o_;
    Caller c_;
    Ino staging_;
    std::string name_;
    uint64_t fh_;
    uint64_t off_ = 0;
    std::string buf_;
    std::string md5_given_;
    bool done_ = false;
  };
  // Starts a PUT of key: checks that it can be stored (its parents are directories or can be
  // made) and opens a file in the staging area.
  S3Result<std::unique_ptr<PutStream>> BeginPut(const Caller& c, Ino bucket, const std::string& key);
  // A file `name` in directory `dir` (a multipart upload's part), written like a PUT's
  // staged file; FinishStaged commits it and keeps it (the stream no longer removes it),
  // returning the MD5 (hex) of what was written.
  S3Result<std::unique_ptr<PutStream>> BeginStaged(const Caller& c, Ino dir, const std::string& name);
  S3Result<std::string> FinishStaged(PutStream* put);
  // Publishes what was written as key, with meta (its etag is set here unless given), if
  // cond holds; the staged file is removed on any failure.
  S3Result<ObjectInfo> Publish(std::unique_ptr<PutStream> put, Ino bucket, const std::string& key, ObjectMeta meta,
                               const WriteCondition& cond);
  // "a/b/": makes the directory (and its parents), marked as an object.
  S3Result<ObjectInfo> PutDirectory(const Caller& c, Ino bucket, const std::string& key, ObjectMeta meta,
                                    const WriteCondition& cond);
  // CopyObject without copying data: the destination shares the source's slices (a clone),
  // published like a PUT. meta: the destination's metadata (the caller decides COPY or
  // REPLACE).
  S3Result<ObjectInfo> Copy(const Caller& c, const ObjectInfo& src, Ino bucket, const std::string& key,
                            ObjectMeta meta, const WriteCondition& cond);
  // Removes key (a missing one is not an error, as in S3) and the now empty directories
  // the gateway made for it.
  S3Result<bool> Delete(const Caller& c, Ino bucket, const std::string& key);

  // Shared with multipart uploads (multipart.h).
  Vfs* vfs() { return vfs_; }
  Ino staging_dir() const { return tmp_dir_; }
  Ino uploads_dir() const { return uploads_dir_; }
  // The gateway's own directory (keys.h): entry `name` of directory `dir` is never an object.
  bool IsGatewayDir(Ino dir, const std::string& name) const { return dir == opts_.root && name == kGatewayDir; }
  // Walks to the directory that holds key's leaf; with make, creates missing directories
  // (marked implicit); errors as S3 maps them.
  S3Result<Ino> ParentOf(const Caller& c, Ino bucket, const KeyPath& k, bool make);
  // Renames staged file `name` in `from` to key's place under the condition, setting meta.
  S3Result<ObjectInfo> PublishStaged(const Caller& c, Ino from, const std::string& name, Ino bucket,
                                     const std::string& key, const KeyPath& k, ObjectMeta meta,
                                     const WriteCondition& cond);
  // A unique name for a staged file.
  static std::string StagingName(const std::string& kind);

 private:
  S3Result<ObjectInfo> Lookup(const Caller& c, Ino bucket, const KeyPath& k);
  // Removes the empty directories the gateway made, from dir upwards (not the bucket).
  void PruneImplicit(const Caller& c, Ino bucket, Ino dir);

  Vfs* vfs_;
  Meta* meta_;
  Options opts_;
  Ino gw_dir_ = 0, tmp_dir_ = 0, uploads_dir_ = 0;
};

// An errno from the volume as the S3 error a client expects (what: the key or bucket).
S3Error FromStatus(const Status& st, const std::string& what);

}  // namespace tierfs::gateway
