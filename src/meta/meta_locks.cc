// BSD flock and POSIX record locks, stored in the engine so that every client (and every
// process sharing an SQLite file) sees them. A lock belongs to (session, owner); locks of a
// dead session are dropped by PurgeSession.
#include <fcntl.h>

#include <algorithm>

#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT

namespace {
using Range = Meta::LockRange;

std::string EncodeRanges(const std::vector<Range>& rs) {
  std::string v;
  PutU32(&v, static_cast<uint32_t>(rs.size()));
  for (const auto& r : rs) {
    PutU8(&v, static_cast<uint8_t>(r.type));
    PutU64(&v, r.start);
    PutU64(&v, r.end);
    PutU32(&v, r.pid);
  }
  return v;
}

std::vector<Range> DecodeRanges(std::string_view v) {
  ByteReader r(v);
  uint32_t n = r.U32();
  std::vector<Range> out;
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    Range x;
    x.type = r.U8();
    x.start = r.U64();
    x.end = r.U64();
    x.pid = r.U32();
    if (r.ok()) out.push_back(x);
  }
  return out;
}

bool Overlap(const Range& a, const Range& b) { return a.start <= b.end && b.start <= a.end; }

// Replaces [want.start, want.end] in an owner's ranges by want (or removes it for F_UNLCK),
// splitting ranges at the edges and merging neighbours of equal type.
std::vector<Range> Update(const std::vector<Range>& cur, const Range& want) {
  std::vector<Range> out;
  for (const auto& r : cur) {
    if (!Overlap(r, want)) {
      out.push_back(r);
      continue;
    }
    if (r.start < want.start) out.push_back({r.type, r.start, want.start - 1, r.pid});
    if (r.end > want.end) out.push_back({r.type, want.end + 1, r.end, r.pid});
  }
  if (want.type != F_UNLCK) out.push_back(want);
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
  std::vector<Range> merged;
  for (const auto& r : out) {
    if (!merged.empty() && merged.back().type == r.type && merged.back().end != UINT64_MAX &&
        merged.back().end + 1 >= r.start) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}
}  // namespace

Status Meta::Flock(Ino ino, uint64_t owner, int type) {
  uint64_t sid = sid_;
  return engine_->Txn([&](KvTxn& t) {
    std::string mine = keys::Flock(ino, sid, owner);
    if (type == F_UNLCK) return t.Delete(mine);
    bool conflict = false;
    RETURN_IF_ERROR(ScanPrefix(t, keys::FlockPrefix(ino), 0, [&](std::string_view k, std::string_view v) {
      if (k == mine) return true;
      int held = v.empty() ? F_RDLCK : static_cast<uint8_t>(v[0]);
      if (type == F_WRLCK || held == F_WRLCK) {
        conflict = true;
        return false;
      }
      return true;
    }));
    if (conflict) return Status::Err(EAGAIN, "file is locked by another owner");
    // A lock of an ended session would be found by nobody (its purge has run).
    RETURN_IF_ERROR(SessionGuardTx(t, sid));
    RETURN_IF_ERROR(t.Put(keys::SessionLock(sid, ino), ""));
    return t.Put(mine, std::string(1, static_cast<char>(type)));
  });
}

Result<Meta::LockRange> Meta::GetLk(Ino ino, uint64_t owner, LockRange want) {
  LockRange found{F_UNLCK, 0, 0, 0};
  uint64_t sid = sid_;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        found = {F_UNLCK, 0, 0, 0};
        std::string mine = keys::Plock(ino, sid, owner);
        return ScanPrefix(t, keys::PlockPrefix(ino), 0, [&](std::string_view k, std::string_view v) {
          if (k == mine) return true;
          for (const auto& r : DecodeRanges(v)) {
            if (Overlap(r, want) && (want.type == F_WRLCK || r.type == F_WRLCK)) {
              found = r;
              return false;
            }
          }
          return true;
        });
      },
      true));
  return found;
}

Status Meta::SetLk(Ino ino, uint64_t owner, LockRange want) {
  uint64_t sid = sid_;
  return engine_->Txn([&](KvTxn& t) {
    std::string mine = keys::Plock(ino, sid, owner);
    std::vector<Range> cur;
    bool conflict = false;
    RETURN_IF_ERROR(ScanPrefix(t, keys::PlockPrefix(ino), 0, [&](std::string_view k, std::string_view v) {
      if (k == mine) {
        cur = DecodeRanges(v);
        return true;
      }
      if (want.type == F_UNLCK) return true;
      for (const auto& r : DecodeRanges(v)) {
        if (Overlap(r, want) && (want.type == F_WRLCK || r.type == F_WRLCK)) {
          conflict = true;
          return false;
        }
      }
      return true;
    }));
    if (conflict) return Status::Err(EAGAIN, "range is locked by another owner");
    std::vector<Range> next = Update(cur, want);
    if (next.empty()) return t.Delete(mine);
    RETURN_IF_ERROR(SessionGuardTx(t, sid));
    RETURN_IF_ERROR(t.Put(keys::SessionLock(sid, ino), ""));
    return t.Put(mine, EncodeRanges(next));
  });
}

Status Meta::ReleaseRecordLocks(Ino ino, uint64_t owner) {
  uint64_t sid = sid_;
  return engine_->Txn([&](KvTxn& t) { return t.Delete(keys::Plock(ino, sid, owner)); });
}

}  // namespace tierfs
