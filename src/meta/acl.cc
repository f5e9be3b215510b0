#include "meta/acl.h"

#include <sys/stat.h>
#include <unistd.h>

#include "meta/meta.h"

namespace tierfs::acl {

namespace {

constexpr uint32_t kXattrVersion = 2;
constexpr size_t kHeaderSize = 4;
constexpr size_t kEntrySize = 8;

uint32_t LoadLe(std::string_view s, size_t off, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(s[off + i])) << (8 * i);
  return v;
}

void StoreLe(std::string* s, uint32_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}

Status Invalid(const std::string& what) { return Status::Err(EINVAL, "invalid POSIX ACL: " + what); }

bool Named(uint16_t tag) { return tag == kUser || tag == kGroup; }

// The entry with `tag` (the first one for named tags), or nullptr; Vec may be const.
template <typename Vec>
auto Find(Vec& entries, uint16_t tag) -> decltype(&entries[0]) {
  for (auto& e : entries) {
    if (e.tag == tag) return &e;
  }
  return nullptr;
}

}  // namespace

Result<Acl> Acl::Parse(std::string_view xattr) {
  Acl acl;
  if (xattr.empty()) return acl;
  if (xattr.size() < kHeaderSize) return Invalid("value shorter than its 4-byte header");
  uint32_t version = LoadLe(xattr, 0, 4);
  if (version != kXattrVersion) {
    return Status::Err(EOPNOTSUPP, "POSIX ACL xattr version " + std::to_string(version) + " is not supported (only 2)");
  }
  if ((xattr.size() - kHeaderSize) % kEntrySize != 0) return Invalid("value is not a whole number of 8-byte entries");
  // The states of the kernel's posix_acl_valid: which tags may come next.
  enum { kWantUserObj, kInUsers, kInGroups, kWantOther, kDone } state = kWantUserObj;
  bool needs_mask = false;
  for (size_t off = kHeaderSize; off < xattr.size(); off += kEntrySize) {
    Entry e;
    e.tag = static_cast<uint16_t>(LoadLe(xattr, off, 2));
    e.perm = static_cast<uint16_t>(LoadLe(xattr, off + 2, 2));
    e.id = LoadLe(xattr, off + 4, 4);
    if (e.perm & ~7u) return Invalid("entry permissions beyond rwx");
    switch (e.tag) {
      case kUserObj:
        if (state != kWantUserObj) return Invalid("owner entry missing first or repeated");
        state = kInUsers;
        break;
      case kUser:
      case kGroup:
        if (state != (e.tag == kUser ? kInUsers : kInGroups)) return Invalid("named entry out of order");
        if (e.id == kNoId) return Invalid("named entry without a valid id");
        needs_mask = true;
        break;
      case kGroupObj:
        if (state != kInUsers) return Invalid("owning-group entry out of order or repeated");
        state = kInGroups;
        break;
      case kMask:
        if (state != kInGroups) return Invalid("mask entry out of order or repeated");
        state = kWantOther;
        break;
      case kOther:
        if (state != kWantOther && !(state == kInGroups && !needs_mask)) {
          return Invalid(state == kInGroups ? "named entries need a mask entry" : "other entry out of order");
        }
        state = kDone;
        break;
      default:
        return Invalid("unknown entry tag " + std::to_string(e.tag));
    }
    if (!Named(e.tag)) e.id = kNoId;
    acl.entries.push_back(e);
  }
  if (acl.entries.empty()) return acl;
  if (state != kDone) return Invalid("owner, owning-group and other entries are required, other last");
  return acl;
}

std::string Acl::Encode() const {
  std::string s;
  s.reserve(kHeaderSize + kEntrySize * entries.size());
  StoreLe(&s, kXattrVersion, 4);
  for (const auto& e : entries) {
    StoreLe(&s, e.tag, 2);
    StoreLe(&s, e.perm, 2);
    StoreLe(&s, Named(e.tag) ? e.id : kNoId, 4);
  }
  return s;
}

Acl Acl::FromMode(uint32_t mode) {
  Acl acl;
  acl.entries = {{kUserObj, static_cast<uint16_t>((mode >> 6) & 7), kNoId},
                 {kGroupObj, static_cast<uint16_t>((mode >> 3) & 7), kNoId},
                 {kOther, static_cast<uint16_t>(mode & 7), kNoId}};
  return acl;
}

bool Acl::IsMinimal() const {
  for (const auto& e : entries) {
    if (e.tag != kUserObj && e.tag != kGroupObj && e.tag != kOther) return false;
  }
  return true;
}

uint32_t Acl::ApplyToMode(uint32_t mode) const {
  const Entry* owner = Find(entries, kUserObj);
  const Entry* group = Find(entries, kMask);
  if (!group) group = Find(entries, kGroupObj);
  const Entry* other = Find(entries, kOther);
  if (!owner || !group || !other) return mode;
  return (mode & ~0777u) | (uint32_t{owner->perm} << 6) | (uint32_t{group->perm} << 3) | other->perm;
}

void Acl::Chmod(uint32_t mode) {
  Entry* group = Find(entries, kMask);
  if (!group) group = Find(entries, kGroupObj);
  for (auto& e : entries) {
    if (e.tag == kUserObj) e.perm = static_cast<uint16_t>((mode >> 6) & 7);
    if (e.tag == kOther) e.perm = static_cast<uint16_t>(mode & 7);
  }
  if (group) group->perm = static_cast<uint16_t>((mode >> 3) & 7);
}

uint32_t Acl::MaskForCreate(uint32_t mode) {
  Entry* group = Find(entries, kMask);
  if (!group) group = Find(entries, kGroupObj);
  for (auto& e : entries) {
    if (e.tag == kUserObj) e.perm &= static_cast<uint16_t>((mode >> 6) & 7);
    if (e.tag == kOther) e.perm &= static_cast<uint16_t>(mode & 7);
  }
  if (group) group->perm &= static_cast<uint16_t>((mode >> 3) & 7);
  return ApplyToMode(mode);
}

Status CheckAccess(const Ctx& ctx, const Attr& a, const Acl* access, int mask) {
  const uint32_t want = static_cast<uint32_t>(mask) & 7;
  if (want == 0) return Status::OK();
  if (ctx.uid == 0) {
    // root may read and write anything, and execute when any x bit is set (or a directory).
    if ((want & X_OK) && !a.IsDir() && !(a.mode & 0111)) return Status::Err(EACCES, "no execute permission");
    return Status::OK();
  }
  auto grants = [&](uint32_t bits) {
    return (bits & want) == want ? Status::OK() : Status::Err(EACCES, "permission denied");
  };
  // As the kernel (acl_permission_check): with no group-class bits (a mask of ---) the
  // ACL is not consulted, so a user in a named entry gets what everyone else gets.
  if (access == nullptr || access->empty() || (a.mode & 070) == 0) {
    if (ctx.uid == a.uid) return grants((a.mode >> 6) & 7);
    if (ctx.InGroup(a.gid)) return grants((a.mode >> 3) & 7);
    return grants(a.mode & 7);
  }
  const std::vector<Entry>& es = access->entries;
  const Entry* mask_entry = Find(es, kMask);
  auto masked = [&](const Entry& e) {
    uint32_t bits = e.perm & (mask_entry ? mask_entry->perm : 7u);
    return (bits & want) == want ? Status::OK()
                                 : Status::Err(EACCES, "permission denied (limited by the ACL's mask)");
  };
  bool group_matched = false;
  for (const Entry& e : es) {
    switch (e.tag) {
      case kUserObj:
        if (ctx.uid == a.uid) return grants(e.perm);
        break;
      case kUser:
        if (ctx.uid == e.id) return masked(e);
        break;
      case kGroupObj:
      case kGroup:
        if (ctx.InGroup(e.tag == kGroupObj ? a.gid : e.id)) {
          group_matched = true;
          if ((e.perm & want) == want) return masked(e);
        }
        break;
      case kOther:
        if (group_matched) return Status::Err(EACCES, "permission denied (no group entry of the ACL grants it)");
        return grants(e.perm);
      default:
        break;
    }
  }
  return Status::Err(EIO, "access ACL has no other entry");
}

}  // namespace tierfs::acl
