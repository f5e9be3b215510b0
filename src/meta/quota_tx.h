// Exact quotas, inside the transaction that changes usage (meta_quota.cc). Not for other
// modules than the meta*.cc files.
//
// A quota limits a directory tree (the entries below it, not the directory itself), a user
// (uid) or a group (gid): bytes (a regular file counts its length rounded up to 4 KiB, as
// the volume's counters do) and inodes. Its record holds the limits and the usage; every
// transaction that changes the usage of an inode in the namespace updates the records it
// counts in and checks their limits, so concurrent writers on many clients cannot overshoot.
// The trash (meta_trash.cc) and unlinked-but-open files count in no quota.
//
// Keys: "QC" lists every quota (u32 n, then n times u8 kind and u64 id); it changes only
// when a quota is set or deleted, so every charging transaction reads it without conflicting
// with the others. "QR" kind id holds the record (i64 max_bytes, i64 max_inodes, i64
// used_bytes, i64 used_inodes; a limit of 0 is none).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "meta/kv_engine.h"
#include "meta/types.h"

namespace tierfs {

enum class QuotaKind : char { kDir = 'D', kUser = 'U', kGroup = 'G' };

struct Quota {
  QuotaKind kind = QuotaKind::kDir;
  uint64_t id = 0;         // the directory's inode, the uid or the gid
  int64_t max_bytes = 0;   // 0: no limit
  int64_t max_inodes = 0;  // 0: no limit
  int64_t used_bytes = 0;
  int64_t used_inodes = 0;
};

namespace internal {

std::string QuotaListKey();
std::string QuotaKey(QuotaKind kind, uint64_t id);
std::string EncodeQuota(const Quota& q);
bool DecodeQuota(std::string_view v, Quota* q);
std::string EncodeQuotaList(const std::vector<std::pair<QuotaKind, uint64_t>>& list);
std::vector<std::pair<QuotaKind, uint64_t>> DecodeQuotaList(std::string_view v);

// What a change of usage is charged to: the uid and gid of the inode (none: unchanged by
// the operation), and the directory quotas above it.
constexpr int64_t kNoOwner = -1;

// One per transaction attempt: reads the quota list on first use.
class QuotaTx {
 public:
  explicit QuotaTx(KvTxn& t) : t_(t) {}
  // True when the volume has no quota at all (the common case: one read, nothing else).
  Result<bool> None();
  // The directory quotas an entry of directory `dir` counts in: dir itself and its
  // ancestors that have one, in no particular order. Empty for the trash. Reads the parent
  // chain only when some directory below the root has a quota.
  Status DirsAbove(Ino dir, std::vector<Ino>* out);
  // Adds bytes and inodes to the quotas of `dirs`, of uid and of gid (kNoOwner: none). With
  // enforce, a positive change that takes a quota past a limit fails with EDQUOT, naming it.
  Status Charge(const std::vector<Ino>& dirs, int64_t uid, int64_t gid, int64_t bytes, int64_t inodes,
                bool enforce);
  // DirsAbove(dir) and Charge with the inode's owner and group.
  Status ChargeIn(Ino dir, uint32_t uid, uint32_t gid, int64_t bytes, int64_t inodes, bool enforce);
  bool HasDir(Ino ino) const { return dirs_.count(ino) > 0; }

 private:
  Status Load();
  Status Apply(QuotaKind kind, uint64_t id, int64_t bytes, int64_t inodes, bool enforce);

  KvTxn& t_;
  bool loaded_ = false;
  std::set<Ino> dirs_;
  std::set<uint64_t> uids_, gids_;
};

// Usage of the tree below directory dir (not dir itself), read inside the transaction;
// *too_big when it has more than limit inodes (then the counts are partial).
// Files with one link whose parent is not the directory they are in get it set.
Status SubtreeUsageTx(KvTxn& t, Ino dir, uint64_t limit, int64_t* bytes, int64_t* inodes, bool* too_big);

// What a regular file, symlink, directory... counts: bytes for regular files.
int64_t QuotaBytes(const Attr& a);

}  // namespace internal
}  // namespace tierfs
