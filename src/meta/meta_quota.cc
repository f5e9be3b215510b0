// Exact quotas (quota_tx.h): the records, their accounting inside transactions, and the
// `tierfs quota` operations.
#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <unordered_set>

#include "common/encoding.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace internal {

std::string QuotaListKey() { return "QC"; }

std::string QuotaKey(QuotaKind kind, uint64_t id) {
  std::string k = "QR";
  PutU8(&k, static_cast<uint8_t>(kind));
  PutU64(&k, id);
  return k;
}

std::string EncodeQuota(const Quota& q) {
  std::string v;
  PutU64(&v, static_cast<uint64_t>(q.max_bytes));
  PutU64(&v, static_cast<uint64_t>(q.max_inodes));
  PutU64(&v, static_cast<uint64_t>(q.used_bytes));
  PutU64(&v, static_cast<uint64_t>(q.used_inodes));
  return v;
}

bool DecodeQuota(std::string_view v, Quota* q) {
  ByteReader r(v);
  q->max_bytes = static_cast<int64_t>(r.U64());
  q->max_inodes = static_cast<int64_t>(r.U64());
  q->used_bytes = static_cast<int64_t>(r.U64());
  q->used_inodes = static_cast<int64_t>(r.U64());
  return r.ok();
}

std::string EncodeQuotaList(const std::vector<std::pair<QuotaKind, uint64_t>>& list) {
  std::string v;
  PutU32(&v, static_cast<uint32_t>(list.size()));
  for (const auto& [kind, id] : list) {
    PutU8(&v, static_cast<uint8_t>(kind));
    PutU64(&v, id);
  }
  return v;
}

std::vector<std::pair<QuotaKind, uint64_t>> DecodeQuotaList(std::string_view v) {
  std::vector<std::pair<QuotaKind, uint64_t>> out;
  ByteReader r(v);
  uint32_t n = r.U32();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    auto kind = static_cast<QuotaKind>(r.U8());
    uint64_t id = r.U64();
    if (r.ok()) out.emplace_back(kind, id);
  }
  return out;
}

std::string QuotaName(QuotaKind kind, uint64_t id) {
  const char* what = kind == QuotaKind::kDir ? "directory inode " : kind == QuotaKind::kUser ? "user " : "group ";
  return what + std::to_string(id);
}

int64_t QuotaBytes(const Attr& a) { return a.IsRegular() ? ChargedBytes(a.length) : 0; }

Status QuotaTx::Load() {
  if (loaded_) return Status::OK();
  ASSIGN_OR_RETURN(auto v, t_.Get(QuotaListKey()));
  loaded_ = true;
  if (!v) return Status::OK();
  for (const auto& [kind, id] : DecodeQuotaList(*v)) {
    if (kind == QuotaKind::kDir) dirs_.insert(id);
    if (kind == QuotaKind::kUser) uids_.insert(id);
    if (kind == QuotaKind::kGroup) gids_.insert(id);
  }
  return Status::OK();
}

Result<bool> QuotaTx::None() {
  RETURN_IF_ERROR(Load());
  return dirs_.empty() && uids_.empty() && gids_.empty();
}

Status QuotaTx::DirsAbove(Ino dir, std::vector<Ino>* out) {
  out->clear();
  RETURN_IF_ERROR(Load());
  if (dirs_.empty() || dir == 0) return Status::OK();
  if (dirs_.size() == 1 && dirs_.count(kRootIno)) {
    // Only the volume's limit: everything in the namespace is below the root.
    out->push_back(kRootIno);
    return Status::OK();
  }
  Ino cur = dir;
  for (int depth = 0; depth < 10000; ++depth) {
    if (cur == kTrashIno) {
      out->clear();
      return Status::OK();
    }
    if (dirs_.count(cur)) out->push_back(cur);
    if (cur == kRootIno) return Status::OK();
    Attr a;
    Status st = GetAttrTx(t_, cur, &a);
    if (st.code() == ENOENT) return Status::OK();  // a removed directory: counts nowhere more
    RETURN_IF_ERROR(st);
    if (a.flags & kAttrInTrash) {
      out->clear();
      return Status::OK();
    }
    cur = a.parent;
    if (cur == 0) return Status::OK();
  }
  return Status::Err(EIO, "directory parent chain too deep or looping above inode " + std::to_string(dir));
}

Status QuotaTx::Apply(QuotaKind kind, uint64_t id, int64_t bytes, int64_t inodes, bool enforce) {
  const std::string key = QuotaKey(kind, id);
  ASSIGN_OR_RETURN(auto v, t_.Get(key));
  if (!v) return Status::OK();  // listed but not written: cannot happen; count nothing
  Quota q;
  if (!DecodeQuota(*v, &q)) return Status::Err(EIO, "corrupt quota record");
  auto name = [&] { return QuotaName(kind, id); };
  if (enforce && bytes > 0 && q.max_bytes > 0 && q.used_bytes + bytes > q.max_bytes) {
    return Status::Err(EDQUOT, "quota of " + name() + " exceeded: " + std::to_string(q.used_bytes) + " of " +
                                   std::to_string(q.max_bytes) + " bytes used, " + std::to_string(bytes) + " more asked");
  }
  if (enforce && inodes > 0 && q.max_inodes > 0 && q.used_inodes + inodes > q.max_inodes) {
    return Status::Err(EDQUOT, "inode quota of " + name() + " exceeded: " + std::to_string(q.used_inodes) + " of " +
                                   std::to_string(q.max_inodes) + " inodes used");
  }
  q.used_bytes += bytes;
  q.used_inodes += inodes;
  return t_.Put(key, EncodeQuota(q));
}

Status QuotaTx::Charge(const std::vector<Ino>& dirs, int64_t uid, int64_t gid, int64_t bytes, int64_t inodes,
                       bool enforce) {
  if (bytes == 0 && inodes == 0) return Status::OK();
  RETURN_IF_ERROR(Load());
  for (Ino d : dirs) RETURN_IF_ERROR(Apply(QuotaKind::kDir, d, bytes, inodes, enforce));
  if (uid >= 0 && uids_.count(static_cast<uint64_t>(uid))) {
    RETURN_IF_ERROR(Apply(QuotaKind::kUser, static_cast<uint64_t>(uid), bytes, inodes, enforce));
  }
  if (gid >= 0 && gids_.count(static_cast<uint64_t>(gid))) {
    RETURN_IF_ERROR(Apply(QuotaKind::kGroup, static_cast<uint64_t>(gid), bytes, inodes, enforce));
  }
  return Status::OK();
}

Status QuotaTx::ChargeIn(Ino dir, uint32_t uid, uint32_t gid, int64_t bytes, int64_t inodes, bool enforce) {
  if (bytes == 0 && inodes == 0) return Status::OK();
  ASSIGN_OR_RETURN(bool none, None());
  if (none) return Status::OK();
  std::vector<Ino> dirs;
  RETURN_IF_ERROR(DirsAbove(dir, &dirs));
  return Charge(dirs, uid, gid, bytes, inodes, enforce);
}

Status SubtreeUsageTx(KvTxn& t, Ino dir, uint64_t limit, int64_t* bytes, int64_t* inodes, bool* too_big) {
  *bytes = *inodes = 0;
  *too_big = false;
  std::deque<Ino> queue{dir};
  std::unordered_set<Ino> seen;
  while (!queue.empty()) {
    Ino d = queue.front();
    queue.pop_front();
    std::vector<Ino> children;
    RETURN_IF_ERROR(ScanPrefix(t, keys::DentryPrefix(d), 0, [&](std::string_view, std::string_view v) {
      ByteReader r(v);
      children.push_back(r.U64());
      return true;
    }));
    for (Ino c : children) {
      if (!seen.insert(c).second) continue;  // another link of a file already counted
      if (seen.size() > limit) {
        *too_big = true;
        return Status::OK();
      }
      Attr a;
      RETURN_IF_ERROR(GetAttrTx(t, c, &a));
      if (!a.IsDir() && a.nlink == 1 && a.parent != d) {
        a.parent = d;  // a volume from before quotas: see CountQuotaUsage
        RETURN_IF_ERROR(PutAttrTx(t, c, a));
      }
      *inodes += 1;
      *bytes += QuotaBytes(a);
      if (a.IsDir()) queue.push_back(c);
    }
  }
  return Status::OK();
}

}  // namespace internal

namespace {

// Whether an inode counts in user and group quotas: in the namespace, not the trash.
bool CountsForOwner(Ino ino, const Attr& a) {
  return ino != kRootIno && ino != kTrashIno && a.nlink > 0 && !(a.flags & kAttrInTrash) && a.parent != kTrashIno;
}

}  // namespace

Result<Quota> Meta::CountQuotaUsage(QuotaKind kind, uint64_t id) {
  Quota q;
  q.kind = kind;
  q.id = id;
  if (kind == QuotaKind::kDir) {
    Ctx root = Ctx::Root();
    std::deque<Ino> queue{id};
    std::unordered_set<Ino> seen;
    while (!queue.empty()) {
      Ino d = queue.front();
      queue.pop_front();
      ASSIGN_OR_RETURN(auto entries, Readdir(root, d, true));
      for (const DirEntry& e : entries) {
        if (e.attr.mode == 0 || !seen.insert(e.ino).second) continue;
        if (!e.attr.IsDir() && e.attr.nlink == 1 && e.attr.parent != d) {
          // Volumes from before quotas kept a renamed file's first directory: its quotas
          // are found from its directory, so that is set right here.
          RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) -> Status {
            Attr a;
            RETURN_IF_ERROR(GetAttrTx(t, e.ino, &a));
            if (a.nlink != 1 || a.parent == d) return Status::OK();
            Ino ino;
            uint32_t type;
            Status st = GetDentryTx(t, d, e.name, &ino, &type);
            if (!st.ok() || ino != e.ino) return Status::OK();  // moved meanwhile
            a.parent = d;
            return PutAttrTx(t, e.ino, a);
          }));
        }
        q.used_inodes++;
        q.used_bytes += QuotaBytes(e.attr);
        if (e.attr.IsDir()) queue.push_back(e.ino);
      }
    }
    return q;
  }
  RETURN_IF_ERROR(ForEachInode([&](Ino ino, const Attr& a) {
    if (!CountsForOwner(ino, a)) return;
    if ((kind == QuotaKind::kUser ? a.uid : a.gid) != id) return;
    q.used_inodes++;
    q.used_bytes += QuotaBytes(a);
  }));
  return q;
}

Status Meta::SetQuota(QuotaKind kind, uint64_t id, std::optional<int64_t> max_bytes,
                      std::optional<int64_t> max_inodes, bool* exact) {
  if ((max_bytes && *max_bytes < 0) || (max_inodes && *max_inodes < 0)) {
    return Status::Err(EINVAL, "a quota limit cannot be negative");
  }
  if (kind == QuotaKind::kDir) {
    ASSIGN_OR_RETURN(Attr a, GetAttr(id));
    if (!a.IsDir()) return Status::Err(ENOTDIR, "a directory quota needs a directory");
    if (id == kTrashIno || a.parent == kTrashIno || (a.flags & kAttrInTrash)) {
      return Status::Err(EPERM, "the trash cannot have a quota");
    }
  }
  if (exact) *exact = true;
  // A new quota needs its usage. A small tree is counted inside the transaction that
  // creates the record (exact); anything else first, in batches.
  std::optional<Quota> counted;
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool need_count = false;
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) -> Status {
      need_count = false;
      ASSIGN_OR_RETURN(auto v, t.Get(QuotaKey(kind, id)));
      Quota q;
      q.kind = kind;
      q.id = id;
      if (v) {
        if (!DecodeQuota(*v, &q)) return Status::Err(EIO, "corrupt quota record of " + QuotaName(kind, id));
      } else if (kind == QuotaKind::kDir && !counted) {
        bool too_big = false;
        RETURN_IF_ERROR(SubtreeUsageTx(t, id, kQuotaCountInTxn, &q.used_bytes, &q.used_inodes, &too_big));
        if (too_big) {
          need_count = true;
          return Status::OK();
        }
      } else if (!counted) {
        need_count = true;
        return Status::OK();
      } else {
        q.used_bytes = counted->used_bytes;
        q.used_inodes = counted->used_inodes;
        if (exact) *exact = false;
      }
      if (max_bytes) q.max_bytes = *max_bytes;
      if (max_inodes) q.max_inodes = *max_inodes;
      if (!v) {
        ASSIGN_OR_RETURN(auto lv, t.Get(QuotaListKey()));
        auto list = lv ? DecodeQuotaList(*lv) : std::vector<std::pair<QuotaKind, uint64_t>>{};
        list.emplace_back(kind, id);
        RETURN_IF_ERROR(t.Put(QuotaListKey(), EncodeQuotaList(list)));
      }
      return t.Put(QuotaKey(kind, id), EncodeQuota(q));
    }));
    if (!need_count) return Status::OK();
    ASSIGN_OR_RETURN(Quota c, CountQuotaUsage(kind, id));
    counted = c;
  }
  return Status::Err(EIO, "could not set the quota of " + QuotaName(kind, id));
}

Result<std::optional<Quota>> Meta::GetQuota(QuotaKind kind, uint64_t id) {
  std::optional<Quota> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) -> Status {
        out.reset();
        ASSIGN_OR_RETURN(auto v, t.Get(QuotaKey(kind, id)));
        if (!v) return Status::OK();
        Quota q;
        q.kind = kind;
        q.id = id;
        if (!DecodeQuota(*v, &q)) return Status::Err(EIO, "corrupt quota record of " + QuotaName(kind, id));
        out = q;
        return Status::OK();
      },
      true));
  return out;
}

Result<std::vector<Quota>> Meta::ListQuotas() {
  std::vector<Quota> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) -> Status {
        out.clear();
        ASSIGN_OR_RETURN(auto lv, t.Get(QuotaListKey()));
        if (!lv) return Status::OK();
        for (const auto& [kind, id] : DecodeQuotaList(*lv)) {
          ASSIGN_OR_RETURN(auto v, t.Get(QuotaKey(kind, id)));
          Quota q;
          q.kind = kind;
          q.id = id;
          if (v && DecodeQuota(*v, &q)) out.push_back(q);
        }
        return Status::OK();
      },
      true));
  return out;
}

Status Meta::DeleteQuota(QuotaKind kind, uint64_t id) {
  return engine_->Txn([&](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto lv, t.Get(QuotaListKey()));
    auto list = lv ? DecodeQuotaList(*lv) : std::vector<std::pair<QuotaKind, uint64_t>>{};
    auto it = std::find(list.begin(), list.end(), std::make_pair(kind, id));
    if (it == list.end()) return Status::Err(ENOENT, "no quota on " + QuotaName(kind, id));
    list.erase(it);
    RETURN_IF_ERROR(list.empty() ? t.Delete(QuotaListKey()) : t.Put(QuotaListKey(), EncodeQuotaList(list)));
    return t.Delete(QuotaKey(kind, id));
  });
}

Status Meta::SetQuotaUsage(QuotaKind kind, uint64_t id, int64_t bytes, int64_t inodes) {
  return engine_->Txn([&](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto v, t.Get(QuotaKey(kind, id)));
    if (!v) return Status::Err(ENOENT, "no quota on " + QuotaName(kind, id));
    Quota q;
    if (!DecodeQuota(*v, &q)) return Status::Err(EIO, "corrupt quota record of " + QuotaName(kind, id));
    q.used_bytes = bytes;
    q.used_inodes = inodes;
    return t.Put(QuotaKey(kind, id), EncodeQuota(q));
  });
}

Result<StatFs> Meta::GetStatFs(Ino ino) {
  std::optional<Quota> limit;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) -> Status {
        limit.reset();
        QuotaTx qt(t);
        ASSIGN_OR_RETURN(bool none, qt.None());
        if (none) return Status::OK();
        Attr a;
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        Ino cur = a.IsDir() ? ino : a.parent;
        // The nearest directory with a quota that limits something, walking up.
        for (int depth = 0; depth < 10000 && cur != 0 && cur != kTrashIno; ++depth) {
          if (qt.HasDir(cur)) {
            ASSIGN_OR_RETURN(auto v, t.Get(QuotaKey(QuotaKind::kDir, cur)));
            Quota q;
            q.id = cur;
            if (v && DecodeQuota(*v, &q) && (q.max_bytes > 0 || q.max_inodes > 0)) {
              limit = q;
              return Status::OK();
            }
          }
          if (cur == kRootIno) break;
          Attr pa;
          RETURN_IF_ERROR(GetAttrTx(t, cur, &pa));
          cur = pa.parent;
        }
        return Status::OK();
      },
      true));
  ASSIGN_OR_RETURN(StatFs fs, GetStatFs());
  if (!limit) return fs;
  if (limit->id != kRootIno) {
    fs.used_bytes = static_cast<uint64_t>(std::max<int64_t>(0, limit->used_bytes));
    fs.inodes = static_cast<uint64_t>(std::max<int64_t>(0, limit->used_inodes));
  }
  if (limit->max_bytes > 0) {
    fs.capacity_bytes = static_cast<uint64_t>(limit->max_bytes);
    fs.capacity_limited = true;
  }
  if (limit->max_inodes > 0) fs.max_inodes = static_cast<uint64_t>(limit->max_inodes);
  return fs;
}

}  // namespace tierfs
