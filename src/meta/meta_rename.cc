// rename(2) and renameat2 (RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT), one transaction.
#include "meta/meta.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "common/clock.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT

// True when `ancestor` is `ino` or one of its ancestors (walks parent pointers).
static Result<bool> IsAncestor(KvTxn& t, Ino ancestor, Ino ino) {
  for (int depth = 0; depth < 10000; ++depth) {
    if (ino == ancestor) return true;
    if (ino == kRootIno) return false;
    Attr a;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    ino = a.parent;
    if (ino == 0) return false;
  }
  return Status::Err(EIO, "directory parent chain too deep or looping");
}

Status Meta::Rename(const Ctx& ctx, Ino parent, const std::string& name, Ino new_parent,
                    const std::string& new_name, uint32_t flags, const RenameCondition* cond) {
  RETURN_IF_ERROR(CheckName(name));
  RETURN_IF_ERROR(CheckName(new_name));
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  if ((flags & kRenameExchange) && (flags & (kRenameNoReplace | kRenameWhiteout))) {
    return Status::Err(EINVAL, "bad rename flags");
  }
  if (flags & ~(kRenameExchange | kRenameNoReplace | kRenameWhiteout)) {
    return Status::Err(EINVAL, "unsupported rename flags");
  }
  if ((flags & kRenameWhiteout) && ctx.uid != 0) return Status::Err(EPERM, "only root may create whiteouts");
  Ino whiteout = 0;
  if (flags & kRenameWhiteout) {
    ASSIGN_OR_RETURN(whiteout, NextInode());
  }
  Ino spare = 0;  // 0: a replaced destination is deleted, not moved to the trash
  if (TrashOn() && !(cond && cond->no_trash)) {
    ASSIGN_OR_RETURN(spare, NextInode());
  }
  int64_t usage = 0, inodes = 0;
  ForgetDir(parent);
  ForgetDir(new_parent);
  RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) {
    usage = inodes = 0;
    int64_t now = NowNanos();
    Attr spa, dpa;
    RETURN_IF_ERROR(GetAttrTx(t, parent, &spa));
    if (!spa.IsDir()) return NotDir(parent);
    RETURN_IF_ERROR(CheckAccessTx(t, ctx, parent, spa, W_OK | X_OK));
    bool same_dir = parent == new_parent;
    if (same_dir) {
      dpa = spa;
    } else {
      RETURN_IF_ERROR(GetAttrTx(t, new_parent, &dpa));
      if (!dpa.IsDir()) return NotDir(new_parent);
      if (dpa.nlink == 0) return Status::Err(ENOENT, "directory was removed");
      RETURN_IF_ERROR(CheckAccessTx(t, ctx, new_parent, dpa, W_OK | X_OK));
    }
    if (InTrash(parent, spa) || InTrash(new_parent, dpa)) return TrashReadOnly();
    if (new_parent == kRootIno && new_name == kTrashName) return TrashReadOnly();
    Ino sino;
    uint32_t stype;
    RETURN_IF_ERROR(GetDentryTx(t, parent, name, &sino, &stype));
    Attr sa;
    RETURN_IF_ERROR(GetAttrTx(t, sino, &sa));
    RETURN_IF_ERROR(CheckSticky(ctx, spa, sa));
    Ino dino = 0;
    uint32_t dtype = 0;
    Attr da;
    {
      Status st = GetDentryTx(t, new_parent, new_name, &dino, &dtype);
      if (!st.ok() && st.code() != ENOENT) return st;
      if (!st.ok()) dino = 0;
    }
    if (dino) RETURN_IF_ERROR(GetAttrTx(t, dino, &da));
    if (cond) {
      // Decided here, in the transaction that publishes: of two racing writers with the
      // same condition, only one can see it hold.
      if (cond->dst_absent && dino) return Status::Err(EEXIST, "'" + new_name + "' exists");
      if (cond->dst_ino && (dino != cond->dst_ino || da.seq != cond->dst_seq)) {
        return Status::Err(ESTALE, "'" + new_name + "' changed");
      }
      for (const auto& [xname, xvalue] : cond->set_xattrs) RETURN_IF_ERROR(t.Put(keys::Xattr(sino, xname), xvalue));
    }
    ForgetDir(sino);
    if (dino) ForgetDir(dino);
    if (dino == sino) return Status::OK();  // both names are links to one inode: nothing to do
    if (dino && (flags & kRenameNoReplace)) return Status::Err(EEXIST, "'" + new_name + "' exists");
    if (!dino && (flags & kRenameExchange)) return Status::Err(ENOENT, "'" + new_name + "' does not exist");
    if (dino) RETURN_IF_ERROR(CheckSticky(ctx, dpa, da));
    bool sdir = sa.IsDir();
    bool ddir = dino && da.IsDir();
    // A directory may not move into its own subtree.
    if (sdir && !same_dir) {
      ASSIGN_OR_RETURN(bool loop, IsAncestor(t, sino, new_parent));
      if (loop) return Status::Err(EINVAL, "cannot move a directory into itself");
    }
    if ((flags & kRenameExchange) && ddir && !same_dir) {
      ASSIGN_OR_RETURN(bool loop, IsAncestor(t, dino, parent));
      if (loop) return Status::Err(EINVAL, "cannot move a directory into itself");
    }
    // Moving a directory to another parent rewrites its ".." : needs write access to it.
    if (sdir && !same_dir && ctx.uid != 0) RETURN_IF_ERROR(CheckAccessTx(t, ctx, sino, sa, W_OK));

    // Quotas. A replaced entry leaves the destination's quotas (checked first, so that
    // replacing a file by one of the same size fits a full quota); an entry moving to other
    // directory quotas takes its usage along, checked against their limits.
    QuotaTx quota(t);
    ASSIGN_OR_RETURN(bool no_quota, quota.None());
    std::vector<Ino> src_quotas, dst_quotas;
    if (!no_quota) {
      RETURN_IF_ERROR(quota.DirsAbove(parent, &src_quotas));
      if (same_dir) {
        dst_quotas = src_quotas;
      } else {
        RETURN_IF_ERROR(quota.DirsAbove(new_parent, &dst_quotas));
      }
      std::sort(src_quotas.begin(), src_quotas.end());
      std::sort(dst_quotas.begin(), dst_quotas.end());
    }
    // Usage of an entry for moving it between quota trees.
    auto usage_of = [&](Ino ino, const Attr& a, int64_t* b, int64_t* i) -> Status {
      *b = QuotaBytes(a);
      *i = 1;
      if (!a.IsDir()) {
        if (a.nlink > 1) return Status::Err(EXDEV, "a file with several links cannot move to other directory quotas");
        return Status::OK();
      }
      int64_t sb = 0, si = 0;
      bool too_big = false;
      RETURN_IF_ERROR(SubtreeUsageTx(t, ino, kQuotaCountInTxn, &sb, &si, &too_big));
      if (too_big) {
        return Status::Err(EXDEV, "a directory of more than " + std::to_string(kQuotaCountInTxn) +
                                      " inodes cannot move to other directory quotas in one step");
      }
      *b += sb;
      *i += si;
      return Status::OK();
    };
    auto move_usage = [&](const std::vector<Ino>& from, const std::vector<Ino>& to, int64_t b, int64_t i) -> Status {
      std::vector<Ino> minus, plus;
      std::set_difference(from.begin(), from.end(), to.begin(), to.end(), std::back_inserter(minus));
      std::set_difference(to.begin(), to.end(), from.begin(), from.end(), std::back_inserter(plus));
      RETURN_IF_ERROR(quota.Charge(minus, kNoOwner, kNoOwner, -b, -i, false));
      return quota.Charge(plus, kNoOwner, kNoOwner, b, i, true);
    };
    const bool cross_quota = !no_quota && src_quotas != dst_quotas;

    if (flags & kRenameExchange) {
      if (cross_quota) {
        int64_t sb, si, db, di;
        RETURN_IF_ERROR(usage_of(sino, sa, &sb, &si));
        RETURN_IF_ERROR(usage_of(dino, da, &db, &di));
        RETURN_IF_ERROR(move_usage(dst_quotas, src_quotas, db, di));
        RETURN_IF_ERROR(move_usage(src_quotas, dst_quotas, sb, si));
      }
      RETURN_IF_ERROR(t.Put(keys::Dentry(parent, name), EncodeDentry(dino, da.mode)));
      RETURN_IF_ERROR(t.Put(keys::Dentry(new_parent, new_name), EncodeDentry(sino, sa.mode)));
      if (!same_dir) {
        if (sdir) { sa.parent = new_parent; spa.nlink--; dpa.nlink++; }
        if (ddir) { da.parent = parent; dpa.nlink--; spa.nlink++; }
        if (!sdir && sa.nlink == 1) sa.parent = new_parent;
        if (!ddir && da.nlink == 1) da.parent = parent;
      }
      sa.ctime_ns = da.ctime_ns = now;
      RETURN_IF_ERROR(PutAttrTx(t, sino, sa));
      RETURN_IF_ERROR(PutAttrTx(t, dino, da));
    } else {
      if (dino) {
        if (sdir && !ddir) return Status::Err(ENOTDIR, "'" + new_name + "' is not a directory");
        if (!sdir && ddir) return Status::Err(EISDIR, "'" + new_name + "' is a directory");
        if (!no_quota && (ddir || da.nlink <= 1)) {
          RETURN_IF_ERROR(quota.Charge(dst_quotas, da.uid, da.gid, -QuotaBytes(da), -1, false));
        }
        if (ddir) {
          bool empty = true;
          RETURN_IF_ERROR(ScanPrefix(t, keys::DentryPrefix(dino), 1, [&](std::string_view, std::string_view) {
            empty = false;
            return false;
          }));
          if (!empty) return Status::Err(ENOTEMPTY, "directory '" + new_name + "' is not empty");
          dpa.nlink--;
          bool trashed = false;
          RETURN_IF_ERROR(TrashTx(t, new_parent, dpa, new_name, dino, &da, now, spare, &trashed));
          if (!trashed) {
            da.nlink = 0;
            inodes = -1;
            RETURN_IF_ERROR(DropLink(t, dino, &da, now));
          }
        } else {
          bool trashed = false;
          RETURN_IF_ERROR(TrashTx(t, new_parent, dpa, new_name, dino, &da, now, spare, &trashed));
          if (!trashed) {
            RETURN_IF_ERROR(DropLink(t, dino, &da, now));
            if (da.nlink == 0 && !(da.IsRegular() && IsOpen(dino))) {
              usage = -ChargedBytes(da.IsRegular() ? da.length : 0);
              inodes = -1;
            }
          }
        }
      }
      if (cross_quota) {
        int64_t sb, si;
        RETURN_IF_ERROR(usage_of(sino, sa, &sb, &si));
        RETURN_IF_ERROR(move_usage(src_quotas, dst_quotas, sb, si));
      }
      RETURN_IF_ERROR(t.Delete(keys::Dentry(parent, name)));
      RETURN_IF_ERROR(t.Put(keys::Dentry(new_parent, new_name), EncodeDentry(sino, sa.mode)));
      if (whiteout) {
        Attr w;
        w.mode = S_IFCHR;
        w.nlink = 1;
        w.uid = ctx.uid;
        w.gid = ctx.gid;
        w.atime_ns = w.mtime_ns = w.ctime_ns = now;
        w.parent = parent;
        RETURN_IF_ERROR(PutAttrTx(t, whiteout, w));
        RETURN_IF_ERROR(t.Put(keys::Dentry(parent, name), EncodeDentry(whiteout, w.mode)));
        inodes++;
        RETURN_IF_ERROR(quota.Charge(src_quotas, w.uid, w.gid, 0, 1, true));
      }
      if (sdir && !same_dir) {
        sa.parent = new_parent;
        spa.nlink--;
        dpa.nlink++;
      }
      if (!sdir && sa.nlink == 1) sa.parent = new_parent;  // a file's directory, for its quotas
      sa.ctime_ns = now;
      RETURN_IF_ERROR(PutAttrTx(t, sino, sa));
    }
    spa.mtime_ns = spa.ctime_ns = now;
    dpa.mtime_ns = dpa.ctime_ns = now;
    // Within one directory only dpa can have changed its link count (a replaced empty
    // subdirectory); spa and dpa are copies of the same inode.
    if (same_dir) return PutAttrTx(t, parent, dpa);
    RETURN_IF_ERROR(PutAttrTx(t, parent, spa));
    return PutAttrTx(t, new_parent, dpa);
  }));
  return Status::OK();
}

}  // namespace tierfs
