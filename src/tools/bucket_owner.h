// Which metadata engine owns a volume's objects. `tierfs load` makes a copy of a volume's
// metadata that points at the same bucket, with the same volume name: a client of the copy
// that deleted objects (gc --delete, the cleaner of a mount, destroy) would delete blocks the
// original still uses, and one that wrote new blocks would reuse the original's slice ids.
// So every engine has an id of its own (key "VE", made on first use, never dumped: a loaded
// copy gets a new one), and the bucket holds a marker naming the engine that owns it:
//
//   VOLUME/owner   JSON {"engine_id", "engine" (its META-URL without password), "host",
//                  "claimed_ns", "seen_ns"}, a plain object under the checksum layer
//
// written by `format`, by the first read-write mount or `gc --delete` of a volume that has
// none (volumes older than the marker), refreshed (seen_ns) by every read-write mount of the
// owner, and moved deliberately by `tierfs config --take-bucket` / `load --take-bucket`.
// A client of another engine may mount read-only (reads only) but not read-write, and gc
// --delete, destroy and upload-staged refuse, naming the owner and the explicit step. A
// running mount re-reads the marker at most once a minute before deleting objects, so the
// old owner's clients stop deleting once a copy took the bucket over.
//
// Taking the bucket over also moves the engine's slice counter 2^40 ahead: if the old
// engine ever wrote again, its new blocks and the new owner's could otherwise get the same
// keys (and clients' caches, which trust that a key's bytes never change, would mix them).
//
// A marker is a plain put: two engines claiming an unowned bucket at the same moment would
// both believe they won (the last write stays); claiming happens at format and first mount.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"

namespace tierfs {

class KvEngine;
class ObjectStore;
struct FormatRecord;

struct BucketOwner {
  std::string engine_id;
  std::string engine;  // the engine's Describe() (no password)
  std::string host;    // where it was last claimed or refreshed
  int64_t claimed_ns = 0;
  int64_t seen_ns = 0;
};

// This engine's id: read, or made and stored when it has none. Fails on a read-only engine
// without one only when create is true.
Result<std::string> EngineId(KvEngine* engine, bool create = true);
// The marker in the store (nullopt: none). `store` may be the checksum layer or below it.
Result<std::optional<BucketOwner>> ReadBucketOwner(ObjectStore* store, const std::string& volume);

// kOwner: this engine's; kClaimed: it had no owner and is this engine's now; kUnowned: it
// has no owner (and claim was false); kOther: another engine's.
enum class Ownership { kOwner, kClaimed, kUnowned, kOther };

// Whether this engine owns the bucket. With claim, a bucket without a marker is claimed
// and the owner's marker refreshed (seen_ns). *other gets the marker of another owner.
Result<Ownership> CheckBucketOwner(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt, bool claim,
                                   BucketOwner* other = nullptr);
// EPERM saying that `action` is refused because another engine owns the bucket, naming it
// and how to take it over; meta_url is this engine's, for the command shown.
Status NotOwner(const BucketOwner& other, const FormatRecord& fmt, const std::string& meta_url,
                const std::string& action);
// Makes this engine the owner (whatever the marker said) and, when another engine owned the
// bucket, moves its slice counter past anything that one could have handed out since the
// copy. Returns the old owner.
Result<std::optional<BucketOwner>> TakeBucket(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt);

// For a running mount: before objects are deleted, whether this engine still owns the
// bucket (the marker re-read at most once a minute; a store error keeps the last answer).
// EPERM once another engine took the bucket over (logged once as an error).
class OwnerGuard {
 public:
  OwnerGuard(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt, std::string engine_id);
  Status CheckDelete();

 private:
  KvEngine* engine_;
  ObjectStore* store_;
  const std::string volume_;
  const std::string engine_id_;
  std::mutex mu_;
  int64_t checked_mono_ns_ = 0;
  bool owner_ = true;
  BucketOwner other_;
};

}  // namespace tierfs
