// Namespace operations: format, open, lookup, attributes, create, link, unlink, readdir.
// Rename lives in meta_rename.cc, xattrs in meta_xattr.cc, data layout in meta_files.cc,
// open files, sessions and background work in meta_session.cc, locks in meta_locks.cc.
#include "meta/meta.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"
#include "meta/record_check.h"

namespace tierfs {

using namespace internal;  // NOLINT


bool Ctx::InGroup(uint32_t g) const {
  if (g == gid) return true;
  if (!groups_loaded_) {
    groups_loaded_ = true;
    if (load_groups) groups_ = load_groups();
  }
  for (uint32_t x : groups_) {
    if (x == g) return true;
  }
  return false;
}


Result<FormatRecord> Meta::UpdateFormat(KvEngine* engine, const std::function<Status(FormatRecord&)>& edit) {
  FormatRecord out;
  RETURN_IF_ERROR(engine->Txn([&](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto v, t.Get(keys::Format()));
    if (!v) return Status::Err(ENOENT, "no TierFS volume in " + engine->Describe() + " (run `tierfs format` first)");
    ASSIGN_OR_RETURN(FormatRecord rec, FormatRecord::FromJson(*v));
    FormatRecord before = rec;
    RETURN_IF_ERROR(edit(rec));
    if (rec.name != before.name || rec.uuid != before.uuid || rec.block_size != before.block_size ||
        rec.version != before.version) {
      return Status::Err(EINVAL, "the name, uuid, block size and format version of a volume cannot change");
    }
    out = rec;
    return t.Put(keys::Format(), rec.ToJson());
  }));
  return out;
}

Result<std::string> Meta::GroupSecret(KvEngine* engine) {
  ASSIGN_OR_RETURN(FormatRecord rec, UpdateFormat(engine, [](FormatRecord& r) -> Status {
                     if (!r.group_secret.empty()) return Status::OK();
                     unsigned char raw[32];
                     if (getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
                       return Status::Err(EIO, "no random bytes for the group secret");
                     }
                     static const char* hex = "0123456789abcdef";
                     for (unsigned char c : raw) {
                       r.group_secret.push_back(hex[c >> 4]);
                       r.group_secret.push_back(hex[c & 15]);
                     }
                     return Status::OK();
                   }));
  return rec.group_secret;
}


Status Meta::Format(KvEngine* engine, const FormatRecord& rec, bool force) {
  bool exists = false;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) {
        auto v = t.Get(keys::Format());
        if (!v.ok()) return v.status();
        exists = v->has_value();
        return Status::OK();
      },
      true));
  if (exists && !force) {
    return Status::Err(EEXIST, engine->Describe() +
                                   " already holds a TierFS volume; refusing to overwrite it (use --force to "
                                   "erase it and format anew)");
  }
  if (exists) RETURN_IF_ERROR(engine->Reset());
  int64_t now = NowNanos();
  return engine->Txn([&](KvTxn& t) {
    RETURN_IF_ERROR(t.Put(keys::Format(), rec.ToJson()));
    Attr root;
    root.mode = S_IFDIR | 0777;
    root.nlink = 2;
    root.length = 4096;
    root.atime_ns = root.mtime_ns = root.ctime_ns = now;
    root.parent = kRootIno;
    RETURN_IF_ERROR(PutAttrTx(t, kRootIno, root));
    RETURN_IF_ERROR(t.Put(keys::Counter("nextInode"), keys::EncodeU64(kRootIno + 1)));
    RETURN_IF_ERROR(t.Put(keys::Counter("nextSlice"), keys::EncodeU64(1)));
    RETURN_IF_ERROR(t.Put(keys::Counter("nextSession"), keys::EncodeU64(1)));
    RETURN_IF_ERROR(t.Put(keys::Counter("usedSpace"), keys::EncodeU64(0)));
    return t.Put(keys::Counter("totalInodes"), keys::EncodeU64(1));
  });
}

Result<std::unique_ptr<Meta>> Meta::Open(std::unique_ptr<KvEngine> engine, MetaOptions opts) {
  ASSIGN_OR_RETURN(FormatRecord format, ReadFormat(engine.get()));
  if (format.changelog_hours > 0 && !opts.engine_logs_changes) engine = WithChangeLog(std::move(engine));
  return std::unique_ptr<Meta>(new Meta(std::move(engine), opts, std::move(format)));
}

Result<FormatRecord> Meta::ReadFormat(KvEngine* engine) {
  std::optional<std::string> rec;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) {
        auto v = t.Get(keys::Format());
        if (!v.ok()) return v.status();
        rec = *v;
        return Status::OK();
      },
      true));
  if (!rec) {
    return Status::Err(ENOENT, engine->Describe() +
                                   " holds no TierFS volume (not formatted); create one with `tierfs format`");
  }
  return FormatRecord::FromJson(*rec);
}

Meta::Meta(std::unique_ptr<KvEngine> engine, MetaOptions opts, FormatRecord format)
    : engine_(std::move(engine)), opts_(opts), format_(std::move(format)) {
  trash_days_ = format_.trash_days;
  if (opts_.session_timeout_ns == 0) opts_.session_timeout_ns = int64_t{format_.session_timeout_s} * 1000000000;
  if (opts_.heartbeat_ns == 0) opts_.heartbeat_ns = std::max<int64_t>(opts_.session_timeout_ns / 5, 500000000);
}

Meta::~Meta() { StopBackground(); }

void Meta::RememberDir(Ino ino, const Attr& a) {
  if (opts_.dir_attr_cache_ns <= 0) return;
  std::lock_guard<std::mutex> l(dir_cache_mu_);
  if (dir_cache_.size() > 4096) dir_cache_.clear();
  auto it = dir_cache_.find(ino);
  // Commits of one directory can finish out of order: keep the newest state.
  if (it != dir_cache_.end() && it->second.attr.ctime_ns > a.ctime_ns) return;
  dir_cache_[ino] = CachedDir{a, MonoNanos() + opts_.dir_attr_cache_ns};
}

void Meta::ForgetDir(Ino ino) {
  if (opts_.dir_attr_cache_ns <= 0) return;
  std::lock_guard<std::mutex> l(dir_cache_mu_);
  dir_cache_.erase(ino);
}

bool Meta::KnownWithoutXattrs(Ino ino) {
  if (opts_.dir_attr_cache_ns <= 0) return false;
  std::lock_guard<std::mutex> l(dir_cache_mu_);
  auto it = fresh_without_xattrs_.find(ino);
  if (it == fresh_without_xattrs_.end()) return false;
  if (it->second > MonoNanos()) return true;
  fresh_without_xattrs_.erase(it);
  return false;
}

Result<Attr> Meta::GetAttr(Ino ino) {
  if (opts_.dir_attr_cache_ns > 0) {
    std::lock_guard<std::mutex> l(dir_cache_mu_);
    auto it = dir_cache_.find(ino);
    if (it != dir_cache_.end()) {
      if (it->second.expires_mono_ns > MonoNanos()) return it->second.attr;
      dir_cache_.erase(it);
    }
  }
  Attr a;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) { return GetAttrTx(t, ino, &a); }, true));
  NoteAclFlags(ino, a);
  return a;
}

Status Meta::Access(const Ctx& ctx, Ino ino, int mask) {
  ASSIGN_OR_RETURN(Attr a, GetAttr(ino));
  return CheckAccess(ctx, ino, a, mask);
}

Result<std::pair<Ino, Attr>> Meta::Lookup(const Ctx& ctx, Ino parent, const std::string& name) {
  if (name.size() > kMaxName) return Status::Err(ENAMETOOLONG, "name longer than 255 bytes");
  std::pair<Ino, Attr> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        Attr pa;
        if (parent == kRootIno && name == kTrashName) {
          RETURN_IF_ERROR(GetAttrTx(t, parent, &pa));
          RETURN_IF_ERROR(CheckAccessTx(t, ctx, parent, pa, X_OK));
          out.first = kTrashIno;
          Status st = GetAttrTx(t, kTrashIno, &out.second);
          if (st.code() == ENOENT) return Status::Err(ENOENT, "the trash is empty");
          return st;
        }
        if (name != "." && name != "..") {
          // Parent, entry and child in one read (one round trip on Redis): the entry's
          // value starts with the child's inode number, as its attribute key does.
          ASSIGN_OR_RETURN(auto v, t.GetIndirect({keys::Inode(parent), keys::Dentry(parent, name)},
                                                 keys::kInodeKeyHead, 8, keys::kInodeKeyTail));
          if (!v[0]) return Status::Err(ENOENT, "inode " + std::to_string(parent) + " does not exist");
          if (!DecodeAttr(*v[0], &pa)) return Status::Err(EIO, "inode " + std::to_string(parent) + " has corrupt attributes");
          if (!pa.IsDir()) return NotDir(parent);
          RETURN_IF_ERROR(CheckAccessTx(t, ctx, parent, pa, X_OK));
          return EntryFromValues(ctx, pa, name, v[1], v[2], &out.first, &out.second);
        }
        // "." and ".." come only from the kernel's export operations (open_by_handle_at,
        // NFS): a file handle names an inode the kernel no longer caches. "." is that
        // inode, of any type, also when it is unlinked but still open somewhere.
        if (name == ".") {
          out.first = parent;
          RETURN_IF_ERROR(GetAttrTx(t, parent, &out.second));
          // A file whose last name went to the trash is, to a handle made before, an
          // unlinked file: stale once nobody holds it open (ext4: ESTALE after the last
          // close). Through .trash it is an entry there, reachable as long as it is.
          if ((out.second.flags & kAttrInTrash) && ctx.outside_trash && !IsOpen(parent)) {
            ASSIGN_OR_RETURN(bool held, HeldOpenTx(t, parent));
            if (!held) return Status::Err(ENOENT, "inode " + std::to_string(parent) + " was removed (it is in the trash)");
          }
          return Status::OK();
        }
        RETURN_IF_ERROR(GetAttrTx(t, parent, &pa));
        if (!pa.IsDir()) return NotDir(parent);
        RETURN_IF_ERROR(CheckAccessTx(t, ctx, parent, pa, X_OK));
        out.first = pa.parent ? pa.parent : kRootIno;
        return GetAttrTx(t, out.first, &out.second);
      },
      true));
  NoteAclFlags(out.first, out.second);
  return out;
}

Result<Attr> Meta::SetAttr(const Ctx& ctx, Ino ino, uint32_t mask, const Attr& in) {
  ForgetDir(ino);
  Attr out;
  int64_t usage = 0;
  RETURN_IF_ERROR(ChargedTxn(&usage, nullptr, [&](KvTxn& t) {
    usage = 0;
    Attr a;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    // A trash entry reached outside the trash is an unlinked file (fchmod, ftruncate work).
    const bool unlinked = (a.flags & kAttrInTrash) && ctx.outside_trash;
    if (InTrash(ino, a) && !unlinked) return TrashReadOnly();
    int64_t now = NowNanos();
    bool owner = ctx.uid == 0 || ctx.uid == a.uid;
    bool changed = false;
    QuotaTx quota(t);
    // In the namespace: counts in quotas.
    const bool counted = a.nlink > 0 && ino != kRootIno && !(a.flags & kAttrInTrash);
    if (mask & (kSetUid | kSetGid)) {
      uint32_t uid = (mask & kSetUid) ? in.uid : a.uid;
      uint32_t gid = (mask & kSetGid) ? in.gid : a.gid;
      if (ctx.uid != 0) {
        if (uid != a.uid) return Status::Err(EPERM, "only root may change the owner");
        if (gid != a.gid && (ctx.uid != a.uid || !ctx.InGroup(gid))) {
          return Status::Err(EPERM, "only the owner may change the group, to one of its groups");
        }
      }
      if ((uid != a.uid || gid != a.gid || ctx.uid != 0) && !a.IsDir()) {
        // chown clears set-user-ID, and set-group-ID when it means mandatory locking is off
        if (a.mode & S_ISUID) a.mode &= ~S_ISUID;
        if ((a.mode & S_ISGID) && (a.mode & S_IXGRP)) a.mode &= ~S_ISGID;
      }
      if (counted && (uid != a.uid || gid != a.gid)) {
        // The inode's usage moves to its new owner or group, checked against their limits.
        const int64_t b = QuotaBytes(a);
        RETURN_IF_ERROR(quota.Charge({}, uid != a.uid ? a.uid : kNoOwner, gid != a.gid ? a.gid : kNoOwner, -b, -1, false));
        RETURN_IF_ERROR(quota.Charge({}, uid != a.uid ? uid : kNoOwner, gid != a.gid ? gid : kNoOwner, b, 1, true));
      }
      a.uid = uid;
      a.gid = gid;
      changed = true;
    }
    if (mask & kSetMode) {
      uint32_t mode = in.mode & 07777;
      // The kernel clears set-user-ID / set-group-ID on behalf of a writer who is not the
      // owner: allow exactly that change (only those bits removed) to anyone who may write.
      const uint32_t ids = S_ISUID | S_ISGID;
      const uint32_t old_mode = a.mode & 07777;
      bool kill_priv = (mode & ~ids) == (old_mode & ~ids) && (mode & ids & ~old_mode) == 0 && mode != old_mode;
      if (!owner && !(kill_priv && CheckAccessTx(t, ctx, ino, a, W_OK).ok())) {
        return Status::Err(EPERM, "only the owner may change the mode");
      }
      if (ctx.uid != 0 && !a.IsDir() && !ctx.InGroup(a.gid)) mode &= ~S_ISGID;
      a.mode = (a.mode & S_IFMT) | mode;
      RETURN_IF_ERROR(ChmodAclTx(t, ino, a));
      changed = true;
    }
    if (mask & (kSetAtime | kSetMtime)) {
      if (!owner) return Status::Err(EPERM, "only the owner may set timestamps");
    }
    if (mask & (kSetAtimeNow | kSetMtimeNow)) {
      if (!owner) RETURN_IF_ERROR(CheckAccessTx(t, ctx, ino, a, W_OK));
    }
    if (mask & kSetAtime) a.atime_ns = in.atime_ns;
    if (mask & kSetAtimeNow) a.atime_ns = now;
    if (mask & kSetMtime) a.mtime_ns = in.mtime_ns;
    if (mask & kSetMtimeNow) a.mtime_ns = now;
    if (mask & (kSetAtime | kSetAtimeNow | kSetMtime | kSetMtimeNow)) changed = true;
    if (mask & kSetSize) {
      if (a.IsDir()) return Status::Err(EISDIR, "cannot truncate a directory");
      if (!a.IsRegular()) return Status::Err(EINVAL, "cannot truncate a special file");
      if (in.length > kMaxFileSize) return Status::Err(EFBIG, "length beyond the 1 PiB file size limit");
      if (in.length != a.length) {
        if (in.length < a.length) {
          // Mask everything at or beyond the new length; the background applies the mask
          // to the records later, so this costs O(1) whatever the file's size.
          a.seq++;
          RETURN_IF_ERROR(t.Put(keys::TruncRule(ino, a.seq), keys::EncodeU64(in.length)));
          RETURN_IF_ERROR(t.Put(keys::PendingTrunc(ino, a.seq), ""));
        }
        usage = ChargedBytes(in.length) - ChargedBytes(a.length);
        if (counted) RETURN_IF_ERROR(quota.ChargeIn(a.parent, a.uid, a.gid, usage, 0, usage > 0));
        a.length = in.length;
        a.allocated = std::min<uint64_t>(a.allocated, static_cast<uint64_t>(ChargedBytes(a.length)));
      }
      a.mtime_ns = now;
      changed = true;
    }
    if (mask & kSetCtime) a.ctime_ns = in.ctime_ns;
    else if (changed) a.ctime_ns = now;
    out = a;
    return PutAttrTx(t, ino, a);
  }));
  return out;
}

Status Meta::CreateEntry(const Ctx& ctx, Ino parent, const std::string& name, Attr attr, const std::string* target,
                         std::pair<Ino, Attr>* out) {
  // Without a name (O_TMPFILE) the inode gets no entry and no link: this session holds it,
  // as an unlinked open file, until its last close (or a link gives it a name).
  bool unnamed = name.empty();
  if (!unnamed) RETURN_IF_ERROR(CheckName(name));
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  ASSIGN_OR_RETURN(Ino ino, NextInode());
  Attr parent_after;
  int64_t one_inode = 1;
  RETURN_IF_ERROR(ChargedTxn(nullptr, &one_inode, [&](KvTxn& t) {
    Attr pa;
    // What a create reads, in one round trip where reads are round trips.
    if (unnamed) {
      RETURN_IF_ERROR(t.Prefetch({keys::Inode(parent), QuotaListKey()}, {}));
    } else {
      RETURN_IF_ERROR(t.Prefetch({keys::Inode(parent), keys::Dentry(parent, name), QuotaListKey()}, {}));
    }
    RETURN_IF_ERROR(GetAttrTx(t, parent, &pa));
    if (!pa.IsDir()) return NotDir(parent);
    // A directory removed into the trash is, to a descriptor of it opened before, removed.
    if (pa.nlink == 0 || ((pa.flags & kAttrInTrash) && ctx.outside_trash)) {
      return Status::Err(ENOENT, "directory was removed");
    }
    if (InTrash(parent, pa) || (parent == kRootIno && name == kTrashName)) return TrashReadOnly();
    RETURN_IF_ERROR(CheckAccessTx(t, ctx, parent, pa, W_OK | X_OK));
    if (!unnamed) {
      auto existing = t.Get(keys::Dentry(parent, name));
      if (!existing.ok()) return existing.status();
      if (existing->has_value()) return Status::Err(EEXIST, "'" + name + "' exists");
    }
    int64_t now = NowNanos();
    Attr a = attr;
    a.uid = ctx.uid;
    a.gid = ctx.gid;
    if (pa.mode & S_ISGID) {
      a.gid = pa.gid;
      if (a.IsDir()) a.mode |= S_ISGID;
    }
    if (!a.IsDir() && (a.mode & S_ISGID) && ctx.uid != 0 && !ctx.InGroup(a.gid)) a.mode &= ~S_ISGID;
    if (!target) RETURN_IF_ERROR(InitAclTx(t, ctx, parent, pa, ino, &a));  // umask or default ACL
    a.atime_ns = a.mtime_ns = a.ctime_ns = now;
    a.parent = parent;
    RETURN_IF_ERROR(PutAttrTx(t, ino, a));
    *out = {ino, a};
    parent_after = pa;
    if (unnamed) return t.Put(keys::Sustained(sid_, ino), "");
    QuotaTx quota(t);
    RETURN_IF_ERROR(quota.ChargeIn(parent, a.uid, a.gid, 0, 1, true));
    RETURN_IF_ERROR(t.Put(keys::Dentry(parent, name), EncodeDentry(ino, a.mode)));
    if (target) RETURN_IF_ERROR(t.Put(keys::Symlink(ino), *target));
    pa.mtime_ns = pa.ctime_ns = now;
    if (a.IsDir()) pa.nlink++;
    RETURN_IF_ERROR(PutAttrTx(t, parent, pa));
    *out = {ino, a};
    parent_after = pa;
    return Status::OK();
  }));
  if (unnamed) {
    std::lock_guard<std::mutex> l(open_mu_);
    open_count_[out->first]++;
    sustained_.insert(out->first);
  } else {
    RememberDir(parent, parent_after);
  }
  if (opts_.dir_attr_cache_ns > 0) {
    std::lock_guard<std::mutex> l(dir_cache_mu_);
    if (fresh_without_xattrs_.size() > 4096) fresh_without_xattrs_.clear();
    fresh_without_xattrs_[out->first] = MonoNanos() + opts_.dir_attr_cache_ns;
  }
  NoteAclFlags(out->first, out->second);
  return Status::OK();
}

Result<std::pair<Ino, Attr>> Meta::Mknod(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode,
                                         uint64_t rdev) {
  uint32_t type = mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK) {
    return Status::Err(EINVAL, "unsupported file type");
  }
  if ((type == S_IFCHR || type == S_IFBLK) && ctx.uid != 0) return Status::Err(EPERM, "only root may create devices");
  Attr a;
  a.mode = type | (mode & 07777);
  a.nlink = 1;
  a.rdev = (type == S_IFCHR || type == S_IFBLK) ? rdev : 0;
  std::pair<Ino, Attr> out;
  RETURN_IF_ERROR(CreateEntry(ctx, parent, name, a, nullptr, &out));
  return out;
}

Result<std::pair<Ino, Attr>> Meta::Tmpfile(const Ctx& ctx, Ino parent, uint32_t mode, bool linkable) {
  Attr a;
  a.mode = S_IFREG | (mode & 07777);
  a.nlink = 0;
  if (linkable) a.flags |= kAttrLinkable;
  std::pair<Ino, Attr> out;
  RETURN_IF_ERROR(CreateEntry(ctx, parent, "", a, nullptr, &out));
  return out;
}

Result<std::pair<Ino, Attr>> Meta::Mkdir(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode) {
  Attr a;
  a.mode = S_IFDIR | (mode & 07777);
  a.nlink = 2;
  a.length = 4096;
  std::pair<Ino, Attr> out;
  RETURN_IF_ERROR(CreateEntry(ctx, parent, name, a, nullptr, &out));
  return out;
}

Result<std::pair<Ino, Attr>> Meta::Symlink(const Ctx& ctx, Ino parent, const std::string& name,
                                           const std::string& target) {
  if (target.empty()) return Status::Err(ENOENT, "empty symlink target");
  if (target.size() >= kMaxSymlink) return Status::Err(ENAMETOOLONG, "symlink target too long");
  Attr a;
  a.mode = S_IFLNK | 0777;
  a.nlink = 1;
  a.length = target.size();
  std::pair<Ino, Attr> out;
  RETURN_IF_ERROR(CreateEntry(ctx, parent, name, a, &target, &out));
  return out;
}

Result<std::string> Meta::Readlink(Ino ino) {
  std::string target;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        auto v = t.Get(keys::Symlink(ino));
        if (!v.ok()) return v.status();
        if (!v->has_value()) return Status::Err(EINVAL, "not a symlink");
        target = **v;
        return Status::OK();
      },
      true));
  return target;
}

Status Meta::DropLink(KvTxn& t, Ino ino, Attr* a, int64_t now) {
  if (a->nlink > 0) a->nlink--;
  a->ctime_ns = now;
  if (a->nlink > 0) return PutAttrTx(t, ino, *a);
  if ((a->IsRegular() || a->IsDir()) && IsOpen(ino)) {
    // Still open here: keep the inode (fstat of the descriptor works, with nlink 0) until
    // the last Release; a dead session's sustained inodes are reclaimed by any live client.
    RETURN_IF_ERROR(PutAttrTx(t, ino, *a));
    {
      std::lock_guard<std::mutex> l(open_mu_);
      sustained_.insert(ino);  // harmless if this transaction is retried or fails
    }
    return t.Put(keys::Sustained(sid_, ino), "");
  }
  NoteFreed(ino);  // an open of it reading concurrently fails (Meta::Open)
  RETURN_IF_ERROR(t.Delete(keys::Inode(ino)));
  RETURN_IF_ERROR(t.Delete(keys::Symlink(ino)));
  std::vector<std::string> xattrs;
  RETURN_IF_ERROR(ScanPrefix(t, keys::XattrPrefix(ino), 0, [&](std::string_view k, std::string_view) {
    xattrs.emplace_back(k);
    return true;
  }));
  for (auto& k : xattrs) RETURN_IF_ERROR(t.Delete(k));
  if (a->IsRegular()) {
    // Chunks are deleted in the background, in proportion to their number, not here.
    RETURN_IF_ERROR(t.Put(keys::PendingFile(ino), keys::EncodeU64(a->length)));
  }
  return Status::OK();
}

// Loads, for unlink and rmdir, a directory the caller may change (write and search) and the
// entry `name` in it, applying the sticky-directory rule.
// Reads in two round trips where reads are round trips: the directory, the entry and the
// quota list (and, with the trash on, the trash and this hour's entry in it), then the
// inode with its xattrs (which a last unlink deletes).
static Status LoadEntryToRemove(KvTxn& t, const Ctx& ctx, Ino parent, const std::string& name, bool trash,
                                Attr* pa, Ino* ino, uint32_t* type, Attr* a) {
  std::vector<std::string> first = {keys::Inode(parent), keys::Dentry(parent, name), QuotaListKey()};
  if (trash) {
    first.push_back(keys::Inode(kTrashIno));
    first.push_back(keys::Dentry(kTrashIno, Meta::TrashHourName(NowNanos())));
  }
  RETURN_IF_ERROR(t.Prefetch(first, {}));
  RETURN_IF_ERROR(GetAttrTx(t, parent, pa));
  if (!pa->IsDir()) return NotDir(parent);
  RETURN_IF_ERROR(CheckAccessTx(t, ctx, parent, *pa, W_OK | X_OK));
  RETURN_IF_ERROR(GetDentryTx(t, parent, name, ino, type));
  RETURN_IF_ERROR(t.Prefetch({keys::Inode(*ino)}, {keys::XattrPrefix(*ino)}));
  RETURN_IF_ERROR(GetAttrTx(t, *ino, a));
  return CheckSticky(ctx, *pa, *a);
}

Status Meta::Unlink(const Ctx& ctx, Ino parent, const std::string& name, bool trash) {
  RETURN_IF_ERROR(CheckName(name));
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  int64_t usage = 0, inodes = 0;
  Attr parent_after;
  Ino spare = 0;
  if (trash && TrashOn()) {
    ASSIGN_OR_RETURN(spare, NextInode());
  }
  RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) {
    usage = inodes = 0;
    Attr pa, a;
    Ino ino;
    uint32_t type;
    RETURN_IF_ERROR(LoadEntryToRemove(t, ctx, parent, name, spare != 0, &pa, &ino, &type, &a));
    if (type == S_IFDIR) return Status::Err(EISDIR, "'" + name + "' is a directory");
    int64_t now = NowNanos();
    RETURN_IF_ERROR(t.Delete(keys::Dentry(parent, name)));
    pa.mtime_ns = pa.ctime_ns = now;
    RETURN_IF_ERROR(PutAttrTx(t, parent, pa));
    parent_after = pa;
    if (a.nlink <= 1 && !InTrash(parent, pa)) {  // the last link leaves the namespace and its quotas
      QuotaTx quota(t);
      RETURN_IF_ERROR(quota.ChargeIn(parent, a.uid, a.gid, -QuotaBytes(a), -1, false));
    }
    bool trashed = false;
    RETURN_IF_ERROR(TrashTx(t, parent, pa, name, ino, &a, now, spare, &trashed));
    if (trashed) return Status::OK();
    RETURN_IF_ERROR(DropLink(t, ino, &a, now));
    if (a.nlink == 0 && !(a.IsRegular() && IsOpen(ino))) {
      usage = -ChargedBytes(a.IsRegular() ? a.length : 0);
      inodes = -1;
    }
    parent_after = pa;
    return Status::OK();
  }));
  RememberDir(parent, parent_after);
  return Status::OK();
}

Status Meta::Rmdir(const Ctx& ctx, Ino parent, const std::string& name, bool trash) {
  if (name == ".") return Status::Err(EINVAL, "cannot remove '.'");
  if (name == "..") return Status::Err(ENOTEMPTY, "cannot remove '..'");
  RETURN_IF_ERROR(CheckName(name));
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  ForgetDir(parent);
  int64_t inodes = -1;
  Ino spare = 0;
  if (trash && TrashOn()) {
    ASSIGN_OR_RETURN(spare, NextInode());
  }
  RETURN_IF_ERROR(ChargedTxn(nullptr, &inodes, [&](KvTxn& t) {
    inodes = -1;
    Attr pa, a;
    Ino ino;
    uint32_t type;
    RETURN_IF_ERROR(LoadEntryToRemove(t, ctx, parent, name, spare != 0, &pa, &ino, &type, &a));
    ForgetDir(ino);
    if (type != S_IFDIR) return Status::Err(ENOTDIR, "'" + name + "' is not a directory");
    bool empty = true;
    RETURN_IF_ERROR(ScanPrefix(t, keys::DentryPrefix(ino), 1, [&](std::string_view, std::string_view) {
      empty = false;
      return false;
    }));
    if (!empty) return Status::Err(ENOTEMPTY, "directory '" + name + "' is not empty");
    int64_t now = NowNanos();
    RETURN_IF_ERROR(t.Delete(keys::Dentry(parent, name)));
    pa.nlink--;
    pa.mtime_ns = pa.ctime_ns = now;
    RETURN_IF_ERROR(PutAttrTx(t, parent, pa));
    if (!InTrash(parent, pa)) {
      QuotaTx quota(t);
      RETURN_IF_ERROR(quota.ChargeIn(parent, a.uid, a.gid, 0, -1, false));
    }
    bool trashed = false;
    RETURN_IF_ERROR(TrashTx(t, parent, pa, name, ino, &a, now, spare, &trashed));
    if (trashed) {
      inodes = 0;  // still held by the volume
      return Status::OK();
    }
    a.nlink = 0;
    return DropLink(t, ino, &a, now);
  }));
  return Status::OK();
}

Result<Attr> Meta::Link(const Ctx& ctx, Ino ino, Ino new_parent, const std::string& new_name) {
  RETURN_IF_ERROR(CheckName(new_name));
  ForgetDir(new_parent);
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  Attr out;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    Attr pa, a;
    RETURN_IF_ERROR(GetAttrTx(t, new_parent, &pa));
    if (!pa.IsDir()) return NotDir(new_parent);
    if (pa.nlink == 0 || ((pa.flags & kAttrInTrash) && ctx.outside_trash)) {
      return Status::Err(ENOENT, "directory was removed");
    }
    if (InTrash(new_parent, pa) || (new_parent == kRootIno && new_name == kTrashName)) return TrashReadOnly();
    RETURN_IF_ERROR(CheckAccessTx(t, ctx, new_parent, pa, W_OK | X_OK));
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    if (a.IsDir()) return Status::Err(EPERM, "hard links to directories are not allowed");
    if (a.flags & kAttrInTrash) return TrashReadOnly();
    QuotaTx quota(t);
    if (a.nlink == 0) {
      // An O_TMPFILE file gets its first name: from now on it counts in quotas.
      RETURN_IF_ERROR(quota.ChargeIn(new_parent, a.uid, a.gid, QuotaBytes(a), 1, true));
      a.parent = new_parent;
    } else {
      // Every link of a file counts in the same directory quotas (those of its first
      // directory, a.parent): a link into other quota trees is refused, as XFS refuses
      // links across project quotas (cp copies instead).
      ASSIGN_OR_RETURN(bool none, quota.None());
      if (!none) {
        std::vector<Ino> from, to;
        RETURN_IF_ERROR(quota.DirsAbove(a.parent, &from));
        RETURN_IF_ERROR(quota.DirsAbove(new_parent, &to));
        std::sort(from.begin(), from.end());
        std::sort(to.begin(), to.end());
        if (from != to) return Status::Err(EXDEV, "a hard link cannot cross directory quotas");
      }
    }
    // Only an O_TMPFILE file opened without O_EXCL may get a name back.
    if (a.nlink == 0 && !(a.flags & kAttrLinkable)) return Status::Err(ENOENT, "file was removed");
    a.flags &= ~kAttrLinkable;
    auto existing = t.Get(keys::Dentry(new_parent, new_name));
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) return Status::Err(EEXIST, "'" + new_name + "' exists");
    int64_t now = NowNanos();
    a.nlink++;
    a.ctime_ns = now;
    pa.mtime_ns = pa.ctime_ns = now;
    RETURN_IF_ERROR(t.Put(keys::Dentry(new_parent, new_name), EncodeDentry(ino, a.mode)));
    RETURN_IF_ERROR(PutAttrTx(t, ino, a));
    RETURN_IF_ERROR(PutAttrTx(t, new_parent, pa));
    out = a;
    return Status::OK();
  }));
  return out;
}

Result<std::vector<DirEntry>> Meta::Readdir(const Ctx& ctx, Ino ino, bool plus, std::vector<DamagedRecord>* damaged) {
  std::vector<DirEntry> out;
  std::vector<DamagedRecord> bad;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        bad.clear();
        Attr a;
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        if (!a.IsDir()) return NotDir(ino);
        RETURN_IF_ERROR(CheckAccessTx(t, ctx, ino, a, R_OK));
        RETURN_IF_ERROR(ScanPrefix(t, keys::DentryPrefix(ino), 0, [&](std::string_view k, std::string_view v) {
          std::string_view name;
          if (!keys::ParseDentryName(k, &name)) return true;
          // A damaged entry is left out (and reported), never the whole directory.
          DirEntry e;
          std::string what = record_check::EntryName(name);
          if (what.empty()) what = record_check::EntryValue(v, &e.ino, &e.type);
          if (!what.empty()) {
            bad.push_back(DamagedRecord{std::string(k), what});
            return true;
          }
          e.name = std::string(name);
          e.type <<= 12;
          out.push_back(std::move(e));
          return true;
        }));
        // An hour of the trash shows a user only the entries the user owns (root sees all):
        // the names of what others removed, perhaps from directories this user could never
        // read, are theirs.
        const bool own_only = a.parent == kTrashIno && ctx.uid != 0;
        if (plus || own_only) {
          for (auto& e : out) {
            // An inode whose attributes are damaged is listed without them (stat then fails).
            ASSIGN_OR_RETURN(auto v, t.Get(keys::Inode(e.ino)));
            if (!v) continue;  // removed meanwhile
            if (!DecodeAttr(*v, &e.attr)) {
              e.attr = Attr();
              bad.push_back(DamagedRecord{keys::Inode(e.ino), "attributes that cannot be decoded"});
            }
          }
        }
        if (own_only) {
          std::erase_if(out, [&](const DirEntry& e) { return e.attr.nlink == 0 || e.attr.uid != ctx.uid; });
        }
        return Status::OK();
      },
      true));
  if (plus) NoteAclFlags(out.data(), out.size());  // the kernel uses these attributes
  if (damaged) {
    *damaged = std::move(bad);
  } else {
    for (const auto& d : bad) record_check::LogDamaged(d);
  }
  return out;
}

Status Meta::FillAttrs(DirEntry* entries, size_t n, std::vector<DamagedRecord>* damaged) {
  std::vector<DamagedRecord> bad;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        bad.clear();
        std::vector<std::string> ks(n);
        for (size_t i = 0; i < n; ++i) ks[i] = keys::Inode(entries[i].ino);
        ASSIGN_OR_RETURN(auto vs, t.GetMany(ks));
        for (size_t i = 0; i < n; ++i) {
          entries[i].attr = Attr();
          const auto& v = vs[i];
          if (!v) continue;  // removed meanwhile
          if (!DecodeAttr(*v, &entries[i].attr)) {
            entries[i].attr = Attr();  // listed without attributes (stat then fails), as Readdir does
            bad.push_back(DamagedRecord{keys::Inode(entries[i].ino), "attributes that cannot be decoded"});
          }
        }
        return Status::OK();
      },
      true));
  for (const auto& d : bad) damaged ? damaged->push_back(d) : record_check::LogDamaged(d);
  NoteAclFlags(entries, n);  // the kernel uses these attributes
  return Status::OK();
}

}  // namespace tierfs
