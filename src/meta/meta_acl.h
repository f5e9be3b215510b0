// POSIX ACLs inside Meta's transactions (for the files that implement Meta only).
//
// Storage: an ACL is the value of the xattr key of its name ("A ino X
// system.posix_acl_access" / "..._default", in the kernel's xattr encoding), so dump,
// load and inode deletion treat it as any xattr. Attr::flags says whether an inode has
// each kind (kAttrAccessAcl, kAttrDefaultAcl): an inode without the bit is never read
// for its ACL, so inodes without ACLs cost what they cost before ACLs existed. An access
// ACL that says no more than the mode is not stored at all (the mode says it).
//
// Invariant: while an inode has an access ACL, the ACL's owner, other and mask (or
// owning-group) entries equal the mode's owner, other and group bits. setxattr, chmod
// and create keep it; so the owner's rights and root's can be judged from the mode alone.
#pragma once

#include <string>
#include <string_view>

#include "meta/acl.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"

namespace tierfs::internal {

// system.posix_acl_access or system.posix_acl_default.
bool IsAclXattr(std::string_view name);

// Whether judging ctx's access to an inode with attributes a needs its access ACL: only
// when it has one and ctx is neither root nor the owner (for them the mode decides).
inline bool NeedsAccessAcl(const Ctx& ctx, const Attr& a) {
  return (a.flags & kAttrAccessAcl) && ctx.uid != 0 && ctx.uid != a.uid;
}

// The access ACL that judging ctx's access to ino needs: ino's ACL when a says it has
// one and ctx is neither root nor the owner (for them the mode decides), else empty
// without a read.
Status LoadAccessAclTx(KvTxn& t, const Ctx& ctx, Ino ino, const Attr& a, acl::Acl* out);

// Whether ctx may access ino (attributes a, read in t) for mask (R_OK|W_OK|X_OK), with
// the ACL LoadAccessAclTx reads.
Status CheckAccessTx(KvTxn& t, const Ctx& ctx, Ino ino, const Attr& a, int mask);

// getxattr of an ACL name: the stored ACL, or ENODATA (without a read when a's flag says
// there is none).
Result<std::string> GetAclXattrTx(KvTxn& t, Ino ino, const Attr& a, std::string_view name);

// setxattr (value) or removexattr (value == nullptr) of an ACL name, as ext4 does it:
// symlinks have none (EOPNOTSUPP); a default ACL only on directories (EACCES, though
// removing one from a file succeeds); only the owner or root (EPERM); a malformed value
// is EINVAL. An access ACL sets the mode's rwx bits and clears set-group-ID when the
// caller is neither root nor in the owning group; it is stored only when the mode cannot
// say it. An empty value removes; removing an absent ACL succeeds. Updates *a (mode,
// flags, ctime) for the caller to write back.
Status ChangeAclXattrTx(KvTxn& t, const Ctx& ctx, Ino ino, Attr* a, std::string_view name,
                        const std::string* value);

// After chmod set a.mode: rewrites ino's access ACL (when it has one) to match.
Status ChmodAclTx(KvTxn& t, Ino ino, const Attr& a);

// For a new inode ino (attributes *a, not yet written) in directory parent (pa): when
// the directory has a default ACL, the new inode's access ACL is that ACL limited by the
// requested mode, its mode follows, and a new directory inherits the default ACL too;
// ctx.umask is then ignored. Otherwise the umask is applied to the mode. Writes the ACL
// keys and sets a->flags. Not for symlinks.
Status InitAclTx(KvTxn& t, const Ctx& ctx, Ino parent, const Attr& pa, Ino ino, Attr* a);

}  // namespace tierfs::internal
