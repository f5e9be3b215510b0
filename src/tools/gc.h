// Garbage collection of object storage: finds block and pack objects that nothing refers to
// (left by a client that crashed between upload and commit, or by a failed commit) and
// slices and packs whose deletion is pending, reports them, and deletes them when asked;
// when deleting it also rewrites packs mostly dead (tools/repack.h).
//
// Objects younger than min_age are never touched: a live client may have uploaded them and
// not committed yet. Runs from one thread; the volume may be mounted meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/repack.h"

namespace tierfs {

class Meta;
class ObjectStore;

struct GcOptions {
  bool delete_garbage = false;
  int64_t min_age_ns = 3600LL * 1000000000;  // one hour
  // Called now and then with a one-line progress message.
  std::function<void(const std::string&)> progress;
  // Packs whose live share is below this are rewritten (with delete_garbage); 0: never.
  double repack_below = 0.5;
  int64_t repack_grace_ns = 600LL * 1000000000;
  // A mirror's own store (mirror/replicator.h): only its unreferenced objects are looked at
  // and deleted; no cleanup rounds, trash expiry or repacking, which would write the
  // mirror's metadata (its replicator's alone). The store given must be the mirror's own.
  bool mirror = false;
};

struct GcReport {
  uint64_t objects = 0, object_bytes = 0;      // block objects listed
  uint64_t referenced = 0;                     // of which some slice refers to
  uint64_t leaked = 0, leaked_bytes = 0;       // no slice refers to them, old enough
  uint64_t young = 0;                          // unreferenced but younger than min_age
  uint64_t pending = 0;                        // objects of slices awaiting deletion
  uint64_t pending_slices = 0;                 // of which held: their deletion time lies ahead
  uint64_t held_slices = 0, held_bytes = 0;    // (compaction's --compact-grace), until held_until_ns
  int64_t held_until_ns = 0;
  uint64_t foreign = 0;                        // under the volume prefix, not block keys
  uint64_t deleted = 0;                        // leaked objects deleted
  std::vector<std::string> leaked_keys;        // the first 100, for the report
  // Packs (small-file packing).
  uint64_t pack_objects = 0, pack_object_bytes = 0;  // listed under packs/
  uint64_t packs_live = 0;                           // of which some live member is in
  uint64_t packs_pending = 0;                        // dead, awaiting deletion
  RepackReport repack;
};

Result<GcReport> CollectGarbage(Meta* meta, ObjectStore* store, const GcOptions& opts);

// Deletes every block object of a slice from a raw store (missing ones are fine).
Status DeleteSliceObjects(ObjectStore* store, const std::string& volume, uint32_t block_size, uint64_t id,
                          uint32_t size);

}  // namespace tierfs
