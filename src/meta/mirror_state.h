// A mirror volume's own records in its metadata engine (docs/key-schema.md). A mirror is a
// volume whose namespace follows another volume's (the primary's) through the primary's
// change log (change_log.h); its replicator (mirror/replicator.h) writes it, its clients
// read it.
//
//   "MS" -> JSON MirrorState: how far the mirror has followed its primary.
//   "ML" -> JSON MirrorLease: the replicator allowed to apply, until when.
//
// Invariant (what a reader may rely on): once `seeding` is false, the mirror's namespace is
// exactly the primary's as it stood at commit `applied` (every logged key, change_log.h's
// IsLoggedKey), because every transaction of the replicator moves it from one such commit
// to a later one and writes `applied` with it. While seeding, it is not a state the primary
// ever had (the copy was made while the primary changed), so clients refuse to open it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "meta/kv_engine.h"

namespace tierfs {

struct MirrorState {
  std::string primary;        // the primary's META-URL, without its password
  uint64_t applied = 0;       // the last primary commit (change-log seq) the mirror holds
  int64_t applied_ns = 0;     // that commit's time on the primary
  bool seeding = true;        // the first copy is still being made or caught up
  uint64_t ready_at = 0;      // seeding: consistent once applied reaches this seq
  uint64_t primary_last = 0;  // the primary's last seq when the replicator last looked
  int64_t checked_ns = 0;     // when it looked (the replicator's clock)
  int64_t block_lag_bytes = 0;  // bytes of blocks still to copy (0 while the store is shared)

  std::string ToJson() const;
  static Result<MirrorState> FromJson(const std::string& json);
};

struct MirrorLease {
  std::string holder;  // "host:pid:random" of the replicator
  int64_t until_ns = 0;
};

std::string MirrorStateKey();
std::string MirrorLeaseKey();

// nullopt when the engine holds no mirror state (not a mirror, or not yet seeded).
Result<std::optional<MirrorState>> ReadMirrorState(KvTxn& t);
Result<std::optional<MirrorState>> ReadMirrorState(KvEngine* engine);
Status WriteMirrorState(KvTxn& t, const MirrorState& s);
Result<std::optional<MirrorLease>> ReadMirrorLease(KvTxn& t);
Status WriteMirrorLease(KvTxn& t, const MirrorLease& l);

}  // namespace tierfs
