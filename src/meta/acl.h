// POSIX access control lists (acl(5)): the kernel's xattr encoding of an ACL, its
// validation, the rules that keep an ACL and a file's mode in step, and the permission
// check. Pure functions over values; Meta stores ACLs and applies these rules
// (meta_acl.cc).
//
// Threads: everything here is a plain value or a pure function; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "meta/types.h"

namespace tierfs {

struct Ctx;

namespace acl {

// The xattr names through which the kernel (and setfacl/getfacl) read and write ACLs.
inline constexpr std::string_view kAccessXattr = "system.posix_acl_access";
inline constexpr std::string_view kDefaultXattr = "system.posix_acl_default";

// Entry tags, as the kernel's xattr format numbers them.
enum Tag : uint16_t {
  kUserObj = 0x01,   // the owning user
  kUser = 0x02,      // a named user (id = uid)
  kGroupObj = 0x04,  // the owning group
  kGroup = 0x08,     // a named group (id = gid)
  kMask = 0x10,      // upper bound for named entries and the owning group
  kOther = 0x20,
};
// The id the kernel writes for entries that name no one.
inline constexpr uint32_t kNoId = 0xffffffff;

struct Entry {
  uint16_t tag = 0;
  uint16_t perm = 0;  // rwx bits: 4 read, 2 write, 1 execute
  uint32_t id = kNoId;
  bool operator==(const Entry&) const = default;
};

// An ACL in the order the kernel keeps and validates: owner, named users, owning group,
// named groups, mask, other. An empty ACL means "none".
struct Acl {
  std::vector<Entry> entries;

  // Decodes the xattr value (u32 version 2, then {u16 tag, u16 perm, u32 id} entries,
  // little-endian) and validates it as the kernel does before it stores one: EINVAL for a
  // truncated value, an unknown tag, perm bits beyond rwx, entries out of order, a missing
  // or repeated owner/group/other entry, or named entries without a mask; EOPNOTSUPP for
  // another version. An empty value, or a header without entries, is the empty ACL.
  static Result<Acl> Parse(std::string_view xattr);
  // The xattr value; ids of entries that name no one are written as kNoId.
  std::string Encode() const;
  // The three-entry ACL that says exactly what the permission bits of mode say.
  static Acl FromMode(uint32_t mode);

  bool empty() const { return entries.empty(); }
  // True when the ACL says no more than a mode can (owner, owning group and other only):
  // such an ACL is stored as the mode alone.
  bool IsMinimal() const;
  // mode with its rwx bits replaced by the ACL's: owner, mask (or owning group when there
  // is no mask), other. The type and set-id/sticky bits are kept.
  uint32_t ApplyToMode(uint32_t mode) const;
  // chmod of a file with this ACL: owner, other, and the mask (or the owning group when
  // there is no mask) take the new mode's bits; named entries keep theirs.
  void Chmod(uint32_t mode);
  // A new file's access ACL from its directory's default ACL (this), for a create asking
  // for `mode`: owner, other and the mask (or owning group) are limited to the mode's bits
  // and the mode to the ACL's. Returns the new file's mode.
  uint32_t MaskForCreate(uint32_t mode);
};

// Whether ctx may access (mask of R_OK, W_OK, X_OK) a file with attributes a and, when
// non-null and not empty, access ACL `access`: root may read and write anything and
// execute when an execute bit is set (or a directory); the owner gets the owner bits;
// then a named user entry (limited by the mask); then the owning group and named groups,
// of which one matching entry must grant everything asked (limited by the mask), and any
// matching group entry that does not denies; everyone else gets the other bits. Without
// an ACL, and (as in the kernel) when the mode's group bits, the mask, are all clear, the
// mode's owner, group and other bits decide. EACCES when denied.
Status CheckAccess(const Ctx& ctx, const Attr& a, const Acl* access, int mask);

}  // namespace acl
}  // namespace tierfs
