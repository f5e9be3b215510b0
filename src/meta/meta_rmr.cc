// Fast removal of a directory tree (`tierfs rmr`): the files of a directory go in batches,
// many per transaction, instead of a lookup, a getattr and an unlink transaction each.
#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace {
constexpr size_t kRemoveBatch = 256;  // entries visited per transaction
}  // namespace

Result<Meta::RemoveProgress> Meta::RemoveContents(const Ctx& ctx, Ino dir, uint64_t budget, bool trash) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  RemoveProgress p;
  struct Frame {
    Ino ino;
    Ino parent;
    std::string name;
  };
  std::vector<Frame> stack{{dir, 0, ""}};
  while (!stack.empty() && p.files + p.dirs < budget) {
    const Frame top = stack.back();
    int64_t usage = 0, inodes = 0;
    size_t removed = 0;
    std::optional<Frame> sub;
    Attr dir_after;
    Ino spare = 0;  // the trash's hour directory, should the batch need a new one
    if (trash && TrashOn()) {
    ASSIGN_OR_RETURN(spare, NextInode());
  }
    RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) {
      usage = inodes = 0;
      removed = 0;
      sub.reset();
      Attr pa;
      RETURN_IF_ERROR(GetAttrTx(t, top.ino, &pa));
      if (!pa.IsDir()) return NotDir(top.ino);
      RETURN_IF_ERROR(CheckAccessTx(t, ctx, top.ino, pa, W_OK | X_OK));
      std::vector<std::pair<std::string, Ino>> files;
      std::string prefix = keys::DentryPrefix(top.ino);
      RETURN_IF_ERROR(ScanPrefix(t, prefix, kRemoveBatch, [&](std::string_view k, std::string_view v) {
        ByteReader r(v);
        Ino ino = r.U64();
        uint32_t type = static_cast<uint32_t>(r.U8()) << 12;
        std::string name(k.substr(prefix.size()));
        if (type == S_IFDIR) {
          if (!sub) sub = Frame{ino, top.ino, name};
        } else {
          files.emplace_back(std::move(name), ino);
        }
        return true;
      }));
      int64_t now = NowNanos();
      QuotaTx quota(t);
      std::vector<Ino> quotas;
      const bool counted = !InTrash(top.ino, pa);
      if (counted && !files.empty()) RETURN_IF_ERROR(quota.DirsAbove(top.ino, &quotas));
      for (auto& [name, ino] : files) {
        Attr a;
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        RETURN_IF_ERROR(CheckSticky(ctx, pa, a));
        RETURN_IF_ERROR(t.Delete(keys::Dentry(top.ino, name)));
        if (counted && a.nlink <= 1) RETURN_IF_ERROR(quota.Charge(quotas, a.uid, a.gid, -QuotaBytes(a), -1, false));
        bool trashed = false;
        RETURN_IF_ERROR(TrashTx(t, top.ino, pa, name, ino, &a, now, spare, &trashed));
        if (trashed) {
          removed++;
          continue;
        }
        RETURN_IF_ERROR(DropLink(t, ino, &a, now));
        if (a.nlink == 0 && !(a.IsRegular() && IsOpen(ino))) {
          usage -= ChargedBytes(a.IsRegular() ? a.length : 0);
          inodes -= 1;
        }
        removed++;
      }
      if (removed > 0) {
        pa.mtime_ns = pa.ctime_ns = now;
        RETURN_IF_ERROR(PutAttrTx(t, top.ino, pa));
      }
      dir_after = pa;
      return Status::OK();
    }));
    if (removed > 0) RememberDir(top.ino, dir_after);
    p.files += removed;
    if (sub) {
      stack.push_back(*sub);
      continue;
    }
    if (removed > 0) continue;
    // Empty now: a subdirectory goes (the tree's root stays, for the caller's rmdir).
    stack.pop_back();
    if (top.ino != dir) {
      RETURN_IF_ERROR(Rmdir(ctx, top.parent, top.name, trash));
      p.dirs++;
    }
  }
  p.done = stack.empty();
  return p;
}

}  // namespace tierfs
