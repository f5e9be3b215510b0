#include "meta/meta_acl.h"

#include <sys/stat.h>

#include "common/clock.h"
#include "meta/key_schema.h"
#include "meta/meta_internal.h"

namespace tierfs {

namespace internal {

namespace {

uint32_t FlagOf(std::string_view name) { return name == acl::kAccessXattr ? kAttrAccessAcl : kAttrDefaultAcl; }

// The ACL stored under name for ino; empty when the key is absent.
Status LoadAclTx(KvTxn& t, Ino ino, std::string_view name, acl::Acl* out) {
  *out = acl::Acl();
  ASSIGN_OR_RETURN(auto v, t.Get(keys::Xattr(ino, name)));
  if (!v) return Status::OK();
  auto parsed = acl::Acl::Parse(*v);
  if (!parsed.ok()) {
    return Status::Err(EIO, "inode " + std::to_string(ino) + " has a corrupt " + std::string(name) + ": " +
                                parsed.status().message());
  }
  *out = std::move(*parsed);
  return Status::OK();
}

// Stores acl under name (or deletes the key when acl is empty) and sets the flag to match.
Status StoreAclTx(KvTxn& t, Ino ino, Attr* a, std::string_view name, const acl::Acl& acl) {
  uint32_t flag = FlagOf(name);
  if (acl.empty()) {
    if (a->flags & flag) RETURN_IF_ERROR(t.Delete(keys::Xattr(ino, name)));
    a->flags &= ~flag;
    return Status::OK();
  }
  a->flags |= flag;
  return t.Put(keys::Xattr(ino, name), acl.Encode());
}

}  // namespace

bool IsAclXattr(std::string_view name) { return name == acl::kAccessXattr || name == acl::kDefaultXattr; }

Status LoadAccessAclTx(KvTxn& t, const Ctx& ctx, Ino ino, const Attr& a, acl::Acl* out) {
  // By the invariant (meta_acl.h) the mode decides for root and the owner.
  if (!NeedsAccessAcl(ctx, a)) {
    *out = acl::Acl();
    return Status::OK();
  }
  return LoadAclTx(t, ino, acl::kAccessXattr, out);
}

Status CheckAccessTx(KvTxn& t, const Ctx& ctx, Ino ino, const Attr& a, int mask) {
  if ((a.flags & kAttrInTrash) && !ctx.outside_trash) {
    if (mask & W_OK) return TrashReadOnly();
    if (ctx.uid != 0 && ctx.uid != a.uid) return Status::Err(EACCES, "only its owner and root may use a trash entry");
  }
  acl::Acl access;
  if ((mask & 7) != 0) RETURN_IF_ERROR(LoadAccessAclTx(t, ctx, ino, a, &access));
  return acl::CheckAccess(ctx, a, &access, mask);
}

Result<std::string> GetAclXattrTx(KvTxn& t, Ino ino, const Attr& a, std::string_view name) {
  if (!(a.flags & FlagOf(name))) return Status::Err(ENODATA, "no " + std::string(name));
  ASSIGN_OR_RETURN(auto v, t.Get(keys::Xattr(ino, name)));
  if (!v) return Status::Err(ENODATA, "no " + std::string(name));
  return std::move(*v);
}

Status ChangeAclXattrTx(KvTxn& t, const Ctx& ctx, Ino ino, Attr* a, std::string_view name,
                        const std::string* value) {
  if (a->IsSymlink()) return Status::Err(EOPNOTSUPP, "symbolic links have no POSIX ACLs");
  acl::Acl acl;
  if (value) {
    ASSIGN_OR_RETURN(acl, acl::Acl::Parse(*value));
  }
  bool is_default = name == acl::kDefaultXattr;
  if (is_default && !a->IsDir()) {
    if (acl.empty()) return Status::OK();  // nothing to remove, as on ext4
    return Status::Err(EACCES, "only directories can have a default ACL");
  }
  if (ctx.uid != 0 && ctx.uid != a->uid) return Status::Err(EPERM, "only the owner or root may change an ACL");
  if (acl.empty() && !(a->flags & FlagOf(name))) return Status::OK();  // nothing to remove: ctime stays
  if (!is_default && !acl.empty()) {
    a->mode = acl.ApplyToMode(a->mode);
    // As the kernel's posix_acl_update_mode: a caller outside the owning group may not
    // leave a set-group-ID file behind.
    if (ctx.uid != 0 && !ctx.InGroup(a->gid)) a->mode &= ~S_ISGID;
    if (acl.IsMinimal()) acl = acl::Acl();  // the mode says it all
  }
  RETURN_IF_ERROR(StoreAclTx(t, ino, a, name, acl));
  a->ctime_ns = NowNanos();
  return Status::OK();
}

Status ChmodAclTx(KvTxn& t, Ino ino, const Attr& a) {
  if (!(a.flags & kAttrAccessAcl)) return Status::OK();
  acl::Acl access;
  RETURN_IF_ERROR(LoadAclTx(t, ino, acl::kAccessXattr, &access));
  if (access.empty()) return Status::OK();
  access.Chmod(a.mode);
  return t.Put(keys::Xattr(ino, acl::kAccessXattr), access.Encode());
}

Status InitAclTx(KvTxn& t, const Ctx& ctx, Ino parent, const Attr& pa, Ino ino, Attr* a) {
  acl::Acl inherited;
  if (pa.flags & kAttrDefaultAcl) RETURN_IF_ERROR(LoadAclTx(t, parent, acl::kDefaultXattr, &inherited));
  if (inherited.empty()) {
    a->mode &= ~(ctx.umask & 0777);
    return Status::OK();
  }
  if (a->IsDir()) RETURN_IF_ERROR(StoreAclTx(t, ino, a, acl::kDefaultXattr, inherited));
  a->mode = inherited.MaskForCreate(a->mode);
  if (inherited.IsMinimal()) return Status::OK();
  return StoreAclTx(t, ino, a, acl::kAccessXattr, inherited);
}

}  // namespace internal

namespace {
// Bounds seen_without_acl_ (about 3 MiB); a client that touches more inodes within one
// attribute-cache window starts over and asks the engine.
constexpr size_t kMaxSeenWithoutAcl = 1 << 16;
}  // namespace

void Meta::NoteAclFlags(Ino ino, const Attr& a) {
  DirEntry e;
  e.ino = ino;
  e.attr = a;
  NoteAclFlags(&e, 1);
}

void Meta::NoteAclFlags(const DirEntry* entries, size_t n) {
  if (opts_.dir_attr_cache_ns <= 0 || n == 0) return;
  const int64_t until = MonoNanos() + opts_.dir_attr_cache_ns;
  std::lock_guard<std::mutex> l(dir_cache_mu_);
  for (size_t i = 0; i < n; ++i) {
    const Attr& a = entries[i].attr;
    if (a.mode == 0) continue;  // not read (removed meanwhile)
    if (a.flags & (kAttrAccessAcl | kAttrDefaultAcl)) {
      seen_without_acl_.erase(entries[i].ino);
      continue;
    }
    if (seen_without_acl_.size() >= kMaxSeenWithoutAcl) seen_without_acl_.clear();
    seen_without_acl_[entries[i].ino] = until;
  }
}

bool Meta::KnownWithoutAcl(Ino ino) {
  if (opts_.dir_attr_cache_ns <= 0) return false;
  std::lock_guard<std::mutex> l(dir_cache_mu_);
  // A directory this client just changed answers GetAttr from dir_cache_: so do its ACLs.
  auto dir = dir_cache_.find(ino);
  if (dir != dir_cache_.end() && dir->second.expires_mono_ns > MonoNanos()) {
    return !(dir->second.attr.flags & (kAttrAccessAcl | kAttrDefaultAcl));
  }
  auto it = seen_without_acl_.find(ino);
  if (it == seen_without_acl_.end()) return false;
  if (it->second > MonoNanos()) return true;
  seen_without_acl_.erase(it);
  return false;
}

Status Meta::CheckAccess(const Ctx& ctx, Ino ino, const Attr& a, int mask) {
  // A transaction only when LoadAccessAclTx would read.
  if (!internal::NeedsAccessAcl(ctx, a)) return acl::CheckAccess(ctx, a, nullptr, mask);
  return engine_->Txn([&](KvTxn& t) { return internal::CheckAccessTx(t, ctx, ino, a, mask); }, true);
}

}  // namespace tierfs
