// `tierfs clone`: a copy of a file or a directory tree that shares the source's slices
// (copy-on-write through their reference counts): no data is copied. The copy is built
// under a hidden name in the destination directory, batch by batch, and renamed to its
// name at the end, so it appears there complete or not at all; an interrupted clone leaves
// the hidden entry (`.tierfs-clone-INO`), which the caller removes on error.
#include <sys/stat.h>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace {
constexpr size_t kCloneBatch = 128;  // entries copied per transaction

// The copy belongs to the caller, as a copy made with cp does: root keeps the source's owner
// and group (cp -a); anybody else owns the copy and keeps the source's group only when a
// member of it (else the copy gets the caller's group), and a copy whose owner or group
// changed loses set-user-ID (and set-group-ID on a file), as chown takes them away.
// Returns whether the owner or group changed.
bool AdoptCopy(const Ctx& ctx, Attr* a) {
  if (ctx.uid == 0) return false;
  const uint32_t uid = ctx.uid, gid = ctx.InGroup(a->gid) ? a->gid : ctx.gid;
  if (uid == a->uid && gid == a->gid) return false;
  a->uid = uid;
  a->gid = gid;
  a->mode &= ~static_cast<uint32_t>(S_ISUID);
  if (!a->IsDir()) a->mode &= ~static_cast<uint32_t>(S_ISGID);
  return true;
}

}  // namespace

// Copies inode `src` (attributes as read) to new inode `ino`, named `name` in `parent`:
// attributes, extended attributes, symlink target, and a regular file's chunk records and
// truncation masks, each slice gaining a reference. Directories get no entries here.
Status Meta::CloneInodeTx(KvTxn& t, const Ctx& ctx, Ino src, const Attr& sa, Ino ino, Ino parent,
                          const std::string& name, int64_t now, int64_t* usage, Attr* copy) {
  Attr a = sa;
  a.nlink = a.IsDir() ? 2 : 1;
  a.parent = parent;
  a.ctime_ns = now;
  a.flags &= ~kAttrLinkable;
  // A file capability is granted by its owner: it does not pass to another owner's copy.
  const bool adopted = AdoptCopy(ctx, &a);
  RETURN_IF_ERROR(PutAttrTx(t, ino, a));
  RETURN_IF_ERROR(t.Put(keys::Dentry(parent, name), EncodeDentry(ino, a.mode)));
  std::vector<std::pair<std::string, std::string>> copies;
  std::string xp = keys::XattrPrefix(src);
  RETURN_IF_ERROR(ScanPrefix(t, xp, 0, [&](std::string_view k, std::string_view v) {
    std::string_view xname = k.substr(xp.size());
    if (adopted && xname == "security.capability") return true;
    copies.emplace_back(keys::Xattr(ino, xname), std::string(v));
    return true;
  }));
  if (a.IsSymlink()) {
    auto target = t.Get(keys::Symlink(src));
    if (!target.ok()) return target.status();
    if (target->has_value()) copies.emplace_back(keys::Symlink(ino), **target);
  }
  if (a.IsRegular()) {
    std::vector<SliceRecord> refs;
    Status damaged;
    RETURN_IF_ERROR(ScanPrefix(t, keys::ChunksPrefix(src), 0, [&](std::string_view k, std::string_view v) {
      uint32_t index;
      SliceRecord r;
      if (!keys::ParseChunkRecordKey(k, &index, &r.seq) || !DecodeSliceRecord(v, &r)) {
        damaged = DamagedChunkRecord(k);  // a copy without it would read other bytes
        return false;
      }
      copies.emplace_back(keys::ChunkRecord(ino, index, r.seq), std::string(v));
      if (r.id != 0) refs.push_back(r);
      return true;
    }));
    RETURN_IF_ERROR(damaged);
    std::string tp = keys::TruncRulesPrefix(src);
    RETURN_IF_ERROR(ScanPrefix(t, tp, 0, [&](std::string_view k, std::string_view v) {
      uint64_t seq = keys::DecodeU64(k.substr(tp.size()));
      copies.emplace_back(keys::TruncRule(ino, seq), std::string(v));
      copies.emplace_back(keys::PendingTrunc(ino, seq), "");
      return true;
    }));
    // One more reference per record, as the records' deletion takes one each.
    std::map<std::pair<uint64_t, uint32_t>, uint64_t> add;
    for (const auto& r : refs) add[{r.id, r.size}]++;
    for (const auto& [slice, n] : add) {
      auto ref = t.Get(keys::SliceRef(slice.first, slice.second));
      if (!ref.ok()) return ref.status();
      uint64_t extra = ref->has_value() ? keys::DecodeU64(**ref) : 0;
      RETURN_IF_ERROR(t.Put(keys::SliceRef(slice.first, slice.second), keys::EncodeU64(extra + n)));
    }
    *usage += ChargedBytes(a.length);
  }
  for (auto& [k, v] : copies) RETURN_IF_ERROR(t.Put(k, v));
  *copy = a;
  return Status::OK();
}

Result<Meta::CloneStats> Meta::Clone(const Ctx& ctx, Ino src, Ino dst_parent, const std::string& name) {
  RETURN_IF_ERROR(CheckName(name));
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  CloneStats stats;
  // The destination must not lie inside the source (the copy would copy itself).
  for (Ino p = dst_parent; p != kRootIno;) {
    if (p == src) return Status::Err(EINVAL, "cannot clone a directory into itself");
    ASSIGN_OR_RETURN(Attr pa, GetAttr(p));
    if (pa.parent == 0 || pa.parent == p) break;
    p = pa.parent;
  }
  if (src == dst_parent) return Status::Err(EINVAL, "cannot clone a directory into itself");
  ASSIGN_OR_RETURN(Ino root, NextInode());
  const std::string hidden = ".tierfs-clone-" + std::to_string(root);
  // The copy's root, under its hidden name.
  {
    int64_t usage = 0, one = 1;
    RETURN_IF_ERROR(ChargedTxn(&usage, &one, [&](KvTxn& t) {
      usage = 0;
      Attr sa, pa;
      RETURN_IF_ERROR(GetAttrTx(t, src, &sa));
      RETURN_IF_ERROR(CheckAccessTx(t, ctx, src, sa, sa.IsDir() ? R_OK | X_OK : R_OK));
      RETURN_IF_ERROR(GetAttrTx(t, dst_parent, &pa));
      if (!pa.IsDir()) return NotDir(dst_parent);
      if (InTrash(dst_parent, pa) || InTrash(src, sa)) return TrashReadOnly();
      RETURN_IF_ERROR(CheckAccessTx(t, ctx, dst_parent, pa, W_OK | X_OK));
      auto existing = t.Get(keys::Dentry(dst_parent, name));
      if (!existing.ok()) return existing.status();
      if (existing->has_value()) return Status::Err(EEXIST, "'" + name + "' exists");
      int64_t now = NowNanos();
      Attr made;
      RETURN_IF_ERROR(CloneInodeTx(t, ctx, src, sa, root, dst_parent, hidden, now, &usage, &made));
      QuotaTx quota(t);
      RETURN_IF_ERROR(quota.ChargeIn(dst_parent, made.uid, made.gid, QuotaBytes(made), 1, true));
      if (sa.IsDir()) pa.nlink++;
      pa.mtime_ns = pa.ctime_ns = now;
      return PutAttrTx(t, dst_parent, pa);
    }));
  }
  ForgetDir(dst_parent);
  auto copy_tree = [&]() -> Status {
    std::vector<std::pair<Ino, Ino>> dirs;  // (source, copy) still to fill
    ASSIGN_OR_RETURN(Attr ra, GetAttr(root));
    if (ra.IsDir()) dirs.emplace_back(src, root);
    stats.files = ra.IsDir() ? 0 : 1;
    stats.dirs = ra.IsDir() ? 1 : 0;
    while (!dirs.empty()) {
      auto [from, to] = dirs.back();
      dirs.pop_back();
      std::string after;  // entries are copied in name order, a batch per transaction
      for (bool more = true; more;) {
        std::vector<std::pair<Ino, Ino>> subdirs;
        uint64_t files = 0;
        int64_t usage = 0, inodes = 0;
        std::string last;
        // Inode numbers for the batch, taken before its transaction (allocation may run a
        // transaction of its own); unused ones are skipped for good, as numbers never return.
        std::vector<Ino> numbers;
        for (size_t i = 0; i < kCloneBatch; ++i) {
          ASSIGN_OR_RETURN(Ino n, NextInode());
          numbers.push_back(n);
        }
        RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) {
          usage = inodes = 0;
          files = 0;
          subdirs.clear();
          Attr fa;
          RETURN_IF_ERROR(GetAttrTx(t, from, &fa));
          RETURN_IF_ERROR(CheckAccessTx(t, ctx, from, fa, R_OK | X_OK));
          std::string prefix = keys::DentryPrefix(from);
          std::vector<std::pair<std::string, Ino>> entries;
          std::string start = after.empty() ? prefix : prefix + after + '\0';
          RETURN_IF_ERROR(t.Scan(start, PrefixEnd(prefix), kCloneBatch, [&](std::string_view k, std::string_view v) {
            ByteReader r(v);
            entries.emplace_back(std::string(k.substr(prefix.size())), r.U64());
            return true;
          }));
          more = entries.size() == kCloneBatch;
          last = entries.empty() ? after : entries.back().first;
          Attr ta;
          RETURN_IF_ERROR(GetAttrTx(t, to, &ta));
          int64_t now = NowNanos();
          QuotaTx quota(t);
          std::vector<Ino> quotas;
          RETURN_IF_ERROR(quota.DirsAbove(to, &quotas));
          size_t next = 0;
          for (auto& [n, child] : entries) {
            Attr ca;
            Status got = GetAttrTx(t, child, &ca);
            if (got.code() == ENOENT) continue;  // removed meanwhile
            RETURN_IF_ERROR(got);
            Ino copy = numbers[next++];
            Attr made;
            RETURN_IF_ERROR(CloneInodeTx(t, ctx, child, ca, copy, to, n, now, &usage, &made));
            RETURN_IF_ERROR(quota.Charge(quotas, made.uid, made.gid, QuotaBytes(made), 1, true));
            inodes++;
            if (ca.IsDir()) {
              ta.nlink++;
              subdirs.emplace_back(child, copy);
            } else {
              files++;
            }
          }
          return PutAttrTx(t, to, ta);
        }));
        after = last;
        stats.files += files;
        stats.dirs += subdirs.size();
        for (auto& d : subdirs) dirs.push_back(d);
      }
    }
    return Status::OK();
  };
  Status st = copy_tree();
  if (st.ok()) st = Rename(Ctx::Root(), dst_parent, hidden, dst_parent, name, kRenameNoReplace);
  if (!st.ok()) {
    // Take the partial copy away again (its slices lose their extra references).
    auto left = Lookup(Ctx::Root(), dst_parent, hidden);
    if (left.ok() && left->second.IsDir()) {
      for (int i = 0; i < 100000; ++i) {
        auto p = RemoveContents(Ctx::Root(), left->first, 100000, /*trash=*/false);
        if (!p.ok() || p->done) break;
      }
      Rmdir(Ctx::Root(), dst_parent, hidden, /*trash=*/false).ok();
    } else if (left.ok()) {
      Unlink(Ctx::Root(), dst_parent, hidden, /*trash=*/false).ok();
    }
    return st;
  }
  return stats;
}

}  // namespace tierfs
