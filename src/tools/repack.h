// Repacking: a pack object whose live members (small files still referenced) fill less than
// a threshold of it is rewritten as a new pack holding only them; the members' locations
// move in one transaction each pack (Meta::MovePackMembers), and the old object goes once
// the grace passed (readers holding the old locations finish first). Run by `tierfs gc`.
//
// Runs from one thread; the volume may be mounted meanwhile (members released during a
// repack simply do not move).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace tierfs {

class Meta;
class ObjectStore;

struct RepackOptions {
  double below = 0.5;  // rewrite packs whose live bytes are less than this share
  int64_t release_grace_ns = 600LL * 1000000000;
  bool dry_run = false;  // only count
  std::function<void(const std::string&)> progress;
};

struct RepackReport {
  uint64_t packs = 0, pack_bytes = 0, live_bytes = 0;  // live packs before
  uint64_t sparse = 0;                                 // of which below the threshold
  uint64_t repacked = 0;                               // rewritten
  uint64_t freed_bytes = 0;                            // dead bytes of the rewritten packs
};

Result<RepackReport> Repack(Meta* meta, ObjectStore* store, const RepackOptions& opts);

}  // namespace tierfs
