// Copies the objects that a mirror's metadata references from the primary's object store
// into the mirror's own (`tierfs mirror --storage ... --bucket ...`), before the metadata
// that references them is applied: a block named by an applied record is in the mirror's
// store (or, for a client that finds it missing there, read through from the primary's).
//
// Which objects a write references (Objects):
//   - a chunk record ("A" ino "C" ...) names a slice: every block of the slice, keys
//     computed from its id and size (a record may show a window of the slice; the primary
//     keeps the slice whole, so the mirror does too);
//   - a pack location ("PL" id) names the pack object that holds a small slice;
//   - the removal of a write-back mark ("W" id: the slice's blocks reached the primary's
//     store after its record was committed) names the slice's blocks, found by listing
//     the key prefix of the slice (the mark does not say the slice's size).
// A slice that may be packed, or is marked as staged, has no blocks of its own in the
// store yet: its pack comes with its "PL" record, its blocks with the mark's removal.
//
// Copy: each object that the mirror's store lacks is read whole from the primary's store
// (the checksum layer verifies every 64 KiB segment; a mismatch is EIO and nothing is
// written) and written to the mirror's (checksummed anew); `threads` objects at a time.
// An object missing at the source that is neither staged nor packed is lost: the primary
// deleted it while this mirror had not applied the commit that released it (possible only
// while the mirror was not a live registered consumer, meta/change_consumers.h). It is
// counted, logged, and the metadata is applied anyway: the mirror cannot wait for an
// object that will never come, and the commits after it no longer reference it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "meta/kv_engine.h"
#include "object/object_store.h"

namespace tierfs::mirror {

// One object to copy, or (listing) a key prefix whose objects are all to be copied.
struct ObjectRef {
  std::string key;
  uint64_t size = 0;      // bytes (0 when listing)
  uint64_t slice = 0;     // the slice it belongs to (0: a pack)
  bool may_be_elsewhere = false;  // packed or staged: absent at the source is expected
  bool listing = false;
};

struct CopyResult {
  uint64_t objects = 0, bytes = 0;  // copied
  uint64_t present = 0;             // already in the mirror's store
  uint64_t deferred = 0;            // packed or staged: they come with a later record
  uint64_t missing = 0;             // lost at the source (see above)
};

class BlockCopier {
 public:
  // primary_engine: looked at for staged marks and pack locations when an object is absent.
  BlockCopier(ObjectStore* from, ObjectStore* to, KvEngine* primary_engine, std::string volume, uint32_t block_size,
              int threads);

  // The objects one write (key, value; null: a delete) references; appended to out.
  void Objects(std::string_view key, const std::string* value, std::vector<ObjectRef>* out) const;

  // Copies those the mirror's store lacks (duplicates in refs are copied once). `left`, when
  // given, counts down the bytes still to copy (the mirror's block lag). The first error
  // (after every thread stopped) fails the copy: the caller applies nothing and retries.
  Result<CopyResult> Copy(std::vector<ObjectRef> refs, std::atomic<int64_t>* left = nullptr);

 private:
  Status CopyOne(const ObjectRef& r, CopyResult* res, std::atomic<int64_t>* left);
  Result<bool> StagedOrPacked(uint64_t slice);

  ObjectStore* from_;
  ObjectStore* to_;
  KvEngine* primary_;
  std::string volume_;
  uint32_t block_size_;
  int threads_;
  std::mutex res_mu_;  // guards the CopyResult a Copy's threads add to
};

}  // namespace tierfs::mirror
