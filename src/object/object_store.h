// The object storage interface: put, ranged get, head, delete, list, multipart.
//
// Keys are '/'-separated strings; objects are immutable once put. Every method may be
// called from any thread concurrently. Errors: ENOENT for a missing object, EACCES for a
// permission problem, EIO for a corrupt object or a failing backend, with a message that
// names the object.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tierfs {

// S3 limits an object's user metadata to 2 KiB, names included.
inline constexpr size_t kMaxObjectMeta = 1800;

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // last modification, 0 when the backend does not know
  std::string etag;      // S3 listings: the ETag without quotes (an MD5 unless multipart); else ""
};

// A page of ListLevel.
struct LevelPage {
  std::vector<ObjectInfo> objects;    // in key order
  std::vector<std::string> prefixes;  // full prefixes, ending in '/', in key order
  std::string next_token;             // "" at the end of the level
};

struct StoreSpace {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // available to unprivileged writers
};

// The segment of the checksums GetVerified gives.
inline constexpr uint32_t kVerifiedSegment = 64 << 10;

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // "file:///data/bucket/" and the like; never includes secrets.
  virtual std::string Describe() const = 0;
  // Creates the bucket/directory if missing, and checks that it is usable (writable).
  virtual Status Init() = 0;
  virtual Status Put(const std::string& key, std::string_view data) = 0;
  // Puts the concatenation of parts as one object. Backends that can send pieces (files,
  // HTTP bodies) override it so that wrappers adding a header never copy the data.
  virtual Status PutParts(const std::string& key, const std::vector<std::string_view>& parts);
  // Reads len bytes at offset off; len < 0 reads to the end. Reading past the end returns
  // what exists (possibly fewer bytes).
  virtual Result<std::string> Get(const std::string& key, uint64_t off = 0, int64_t len = -1) = 0;
  // A whole object, and the checksums this store verified it against on the way when it
  // did (ChecksumStore: Checksum32 of every 64 KiB segment, kVerifiedSegment), so that a
  // cache that keeps the same checksums takes them instead of hashing every byte again.
  // The other stores (and ChecksumStore for objects of other segment sizes) leave *sums
  // empty.
  virtual Result<std::string> GetVerified(const std::string& key, std::vector<uint32_t>* sums);
  virtual Result<ObjectInfo> Head(const std::string& key) = 0;
  // Deleting a missing object succeeds.
  virtual Status Delete(const std::string& key) = 0;
  // Objects whose key starts with prefix and sorts after start_after, in key order, at most
  // limit of them. An empty result means the listing is complete.
  virtual Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                               size_t limit) = 0;

  // One level of the keys under prefix, as S3 lists with the delimiter '/': the objects
  // whose key has no '/' after prefix, and, once each, the prefixes ("prefix" + "a/") of
  // all keys that have one (a marker object "a/" included), in key order, a page at a time
  // from token ("" the first page). Stores that cannot (RADOS, files) answer EOPNOTSUPP:
  // the caller lists flat. sync's parallel listing (sync/store_side.cc) lists each prefix
  // found on its own thread.
  virtual Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token);

  // Multipart upload, for large objects. Backends without native support emulate it.
  virtual Result<std::string> CreateMultipart(const std::string& key) = 0;
  virtual Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                            std::string_view data) = 0;
  virtual Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) = 0;
  virtual Status AbortMultipart(const std::string& key, const std::string& upload_id) = 0;

  // Object metadata: a short string of base64 characters (at most kMaxObjectMeta) kept with
  // the object and returned by every Get of it, ranged ones included, in the same request.
  // Only stores whose HasObjectMeta() is true implement the two calls (S3: user metadata,
  // x-amz-meta-tierfs; Azure: x-ms-meta-tierfs); the others answer EOPNOTSUPP. ChecksumStore keeps its checksum
  // table there, so that an object is exactly as long as its data (see checksum_store.h).
  // An object put without metadata reads back with an empty one.
  virtual bool HasObjectMeta() const { return false; }
  virtual Status PutWithMeta(const std::string& key, std::string_view data, const std::string& meta);
  virtual Result<std::string> GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta);

  // Makes every Put that has returned durable against a power loss of the machine holding
  // the objects. Stores whose puts are durable when they return (S3, RADOS, Azure) need
  // nothing.
  virtual Status Sync() { return Status::OK(); }

  // The size and free space of what holds the objects, when the store knows them (a local
  // directory: its file system), for statfs of a volume without a capacity limit. nullopt
  // when unknown (S3, RADOS, Azure, memory). Wrappers forward it.
  virtual std::optional<StoreSpace> Space() const { return std::nullopt; }
};

// How long a request may wait for the store, across all its retries (`mount --io-timeout`;
// common/io_budget.h): then it fails with EIO.
inline constexpr int kDefaultIoTimeoutS = 60;

// Where a volume's objects live, as chosen at format time (and changed by `tierfs config`).
struct StorageSpec {
  std::string storage;     // "file", "mem", "s3", "rados", "azure"
  std::string bucket;      // directory (file), name (mem), http(s)://HOST[:PORT]/BUCKET or
                           // http(s)://BUCKET.HOST[:PORT] (s3), pool name (rados),
                           // https://ACCOUNT.blob.core.windows.net/CONTAINER or
                           // http(s)://HOST[:PORT]/ACCOUNT/CONTAINER (azure)
  std::string access_key;  // s3: access key id; rados: client name (default client.admin);
                           // azure: account name (default: the URL's)
  std::string secret_key;  // s3: secret access key; azure: account key or "sas:TOKEN";
                           // never logged or shown
  std::string session_token;  // s3: optional STS token
  std::string ceph_conf;   // rados: ceph.conf path ("" = $CEPH_CONF or Ceph's default)
  // file: fsync every object (and its directory entry) before Put returns, so that no
  // metadata can reach the disk before the blocks it points to. Off trades that power-loss
  // guarantee for speed (see README, "Consistency and durability").
  bool sync_puts = true;
  // file: the share of the bucket's disk kept free (FileStoreOptions::min_free_ratio).
  double free_space_ratio = 0;
  // Checksum tables in object metadata where the store has it (format version 2 on S3 and
  // Azure; see checksum_store.h); otherwise in front of each object's data.
  bool checksums_in_meta = false;
  // The volume whose objects live under "VOLUME/" (file: that directory is kept private to
  // the owner, mode 0700, also when an older version made it readable by others).
  std::string volume{};
  // The most a request waits for the store, retries included (s3, azure: the retry
  // deadline and each attempt's limits; rados: the OSD operation timeout). Not stored in
  // the volume: a setting of the process that opens it.
  int io_timeout_s = kDefaultIoTimeoutS;
};

// Creates a store: storage "file" (bucket = directory), "mem" (bucket = name shared within
// the process), "s3", "rados" or "azure". Unknown storage types get a clear error. The
// result is wrapped with checksums (see checksum_store.h).
Result<std::unique_ptr<ObjectStore>> CreateObjectStore(const StorageSpec& spec);
// Shorthand for stores that need no credentials (file, mem).
Result<std::unique_ptr<ObjectStore>> CreateObjectStore(const std::string& storage, const std::string& bucket);
// The same store without the checksum wrapper (objbench and tests of raw backends).
Result<std::unique_ptr<ObjectStore>> CreateRawObjectStore(const StorageSpec& spec);

}  // namespace tierfs
