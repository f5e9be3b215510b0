// Extended attributes: namespaces and limits as Linux, permission checks, POSIX ACLs
// through meta_acl.
#include "meta/meta.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/clock.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT

static Status CheckXattrAccess(KvTxn& t, const Ctx& ctx, Ino ino, const Attr& a, const std::string& name,
                               bool write) {
  // A namespace with nothing after it ("user.") is invalid, as on local Linux file systems.
  for (const char* ns : {"user.", "trusted.", "security.", "system."}) {
    if (name == ns) return Status::Err(EINVAL, "xattr name '" + name + "' has no name after the namespace");
  }
  if (name.rfind("user.", 0) == 0) {
    if (!a.IsRegular() && !a.IsDir()) return Status::Err(write ? EPERM : ENODATA, "user xattrs only on files and directories");
    return CheckAccessTx(t, ctx, ino, a, write ? W_OK : R_OK);
  }
  if (name.rfind("trusted.", 0) == 0) {
    if (ctx.uid != 0) return Status::Err(write ? EPERM : ENODATA, "trusted xattrs are for root");
    return Status::OK();
  }
  if (name.rfind("security.", 0) == 0) {
    if (write && ctx.uid != 0 && ctx.uid != a.uid) return Status::Err(EPERM, "not the owner");
    return Status::OK();
  }
  // POSIX ACLs: anyone may read them; meta_acl.cc judges changes.
  if (IsAclXattr(name)) return Status::OK();
  if (name.rfind("system.", 0) == 0) return Status::Err(EOPNOTSUPP, "system xattr " + name + " is not supported");
  return Status::Err(EOPNOTSUPP, "unknown xattr namespace");
}

Result<std::string> Meta::GetXattr(const Ctx& ctx, Ino ino, const std::string& name) {
  // security.* is readable by everyone, so no permission check is skipped here.
  if (name.rfind("security.", 0) == 0 && KnownWithoutXattrs(ino)) {
    return Status::Err(ENODATA, "no xattr " + name);
  }
  if (IsAclXattr(name) && KnownWithoutAcl(ino)) return Status::Err(ENODATA, "no " + name);
  std::string value;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        Attr a;
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        RETURN_IF_ERROR(CheckXattrAccess(t, ctx, ino, a, name, false));
        if (IsAclXattr(name)) {
          ASSIGN_OR_RETURN(value, GetAclXattrTx(t, ino, a, name));
          return Status::OK();
        }
        auto v = t.Get(keys::Xattr(ino, name));
        if (!v.ok()) return v.status();
        if (!v->has_value()) return Status::Err(ENODATA, "no xattr " + name);
        value = **v;
        return Status::OK();
      },
      true));
  return value;
}

Status Meta::SetXattr(const Ctx& ctx, Ino ino, const std::string& name, const std::string& value, int flags) {
  if (name.empty()) return Status::Err(EINVAL, "empty xattr name");
  if (name.size() > kMaxXattrName) return Status::Err(ERANGE, "xattr name longer than 255 bytes");
  if (value.size() > kMaxXattrValue) return Status::Err(E2BIG, "xattr value larger than 64 KiB");
  return ChangeXattr(ctx, ino, name, &value, flags);
}

// Sets (value != nullptr, honouring XATTR_CREATE/XATTR_REPLACE) or removes an xattr, and
// updates the inode's ctime, in one transaction.
Status Meta::ChangeXattr(const Ctx& ctx, Ino ino, const std::string& name, const std::string* value, int flags) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  {
    std::lock_guard<std::mutex> l(dir_cache_mu_);
    fresh_without_xattrs_.erase(ino);
    seen_without_acl_.erase(ino);
  }
  return engine_->Txn([&](KvTxn& t) {
    Attr a;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    RETURN_IF_ERROR(CheckXattrAccess(t, ctx, ino, a, name, true));
    if (IsAclXattr(name)) {
      // Flags do not apply: setting an ACL replaces it, removing an absent one succeeds.
      ForgetDir(ino);
      RETURN_IF_ERROR(ChangeAclXattrTx(t, ctx, ino, &a, name, value));
      return PutAttrTx(t, ino, a);
    }
    auto v = t.Get(keys::Xattr(ino, name));
    if (!v.ok()) return v.status();
    bool exists = v->has_value();
    if (value && (flags & XATTR_CREATE) && exists) return Status::Err(EEXIST, "xattr " + name + " exists");
    if ((!value || (flags & XATTR_REPLACE)) && !exists) return Status::Err(ENODATA, "no xattr " + name);
    ForgetDir(ino);
    a.ctime_ns = NowNanos();
    RETURN_IF_ERROR(PutAttrTx(t, ino, a));
    return value ? t.Put(keys::Xattr(ino, name), *value) : t.Delete(keys::Xattr(ino, name));
  });
}

Result<std::vector<std::string>> Meta::ListXattr(const Ctx& ctx, Ino ino) {
  std::vector<std::string> names;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        names.clear();
        Attr a;
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        std::string prefix = keys::XattrPrefix(ino);
        return ScanPrefix(t, prefix, 0, [&](std::string_view k, std::string_view) {
          std::string name(k.substr(prefix.size()));
          if (name.rfind("trusted.", 0) == 0 && ctx.uid != 0) return true;
          names.push_back(std::move(name));
          return true;
        });
      },
      true));
  return names;
}

Status Meta::RemoveXattr(const Ctx& ctx, Ino ino, const std::string& name) {
  return ChangeXattr(ctx, ino, name, nullptr, 0);
}

}  // namespace tierfs
