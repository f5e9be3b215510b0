#include "meta/acl.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <initializer_list>

#include "meta/meta.h"

namespace tierfs::acl {
namespace {

// The kernel's xattr encoding built by hand, independent of Acl::Encode.
std::string Xattr(std::initializer_list<Entry> entries, uint32_t version = 2) {
  std::string s;
  auto put = [&](uint32_t v, int n) {
    for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  };
  put(version, 4);
  for (const Entry& e : entries) {
    put(e.tag, 2);
    put(e.perm, 2);
    put(e.id, 4);
  }
  return s;
}

std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

Acl Must(std::string_view xattr) {
  auto r = Acl::Parse(xattr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Acl();
}

// u::rw-, u:1000:rw-, g::r--, g:2000:rwx, m::rw-, o::---
std::string Full() {
  return Xattr({{kUserObj, 6, kNoId},
                {kUser, 6, 1000},
                {kGroupObj, 4, kNoId},
                {kGroup, 7, 2000},
                {kMask, 6, kNoId},
                {kOther, 0, kNoId}});
}

Ctx User(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups = {}, int* loads = nullptr) {
  Ctx c;
  c.uid = uid;
  c.gid = gid;
  c.load_groups = [groups, loads] {
    if (loads) ++*loads;
    return groups;
  };
  return c;
}

Attr File(uint32_t mode, uint32_t uid = 0, uint32_t gid = 0) {
  Attr a;
  a.mode = S_IFREG | mode;
  a.uid = uid;
  a.gid = gid;
  return a;
}

TEST(AclFormat, RoundTripsTheKernelEncoding) {
  Acl acl = Must(Full());
  ASSERT_EQ(acl.entries.size(), 6u);
  EXPECT_EQ(acl.entries[1], (Entry{kUser, 6, 1000}));
  EXPECT_EQ(acl.entries[3], (Entry{kGroup, 7, 2000}));
  EXPECT_EQ(acl.Encode(), Full());
  // What ext4 returns for `setfacl -m u:5:r` on a 0664 file, byte for byte.
  Acl ext4 = Must(Xattr({{kUserObj, 6, kNoId}, {kUser, 4, 5}, {kGroupObj, 4, kNoId}, {kMask, 6, kNoId},
                         {kOther, 4, kNoId}}));
  EXPECT_EQ(Hex(ext4.Encode()),
            "0200000001000600ffffffff020004000500000004000400ffffffff10000600ffffffff20000400ffffffff");
}

TEST(AclFormat, IdsOfUnnamedEntriesAreNormalized) {
  Acl acl = Must(Xattr({{kUserObj, 7, 1234}, {kGroupObj, 5, 77}, {kOther, 1, 9}}));
  EXPECT_EQ(acl.entries[0].id, kNoId);
  EXPECT_EQ(acl.Encode(), Xattr({{kUserObj, 7, kNoId}, {kGroupObj, 5, kNoId}, {kOther, 1, kNoId}}));
}

TEST(AclFormat, EmptyMeansNone) {
  EXPECT_TRUE(Must("").empty());
  EXPECT_TRUE(Must(Xattr({})).empty());
}

TEST(AclFormat, RejectsWhatTheKernelRejects) {
  struct Case {
    const char* what;
    std::string value;
    int err;
  };
  const Case cases[] = {
      {"short header", std::string("\x02\x00", 2), EINVAL},
      {"version 1", Xattr({{kUserObj, 6, kNoId}, {kGroupObj, 4, kNoId}, {kOther, 4, kNoId}}, 1), EOPNOTSUPP},
      {"trailing bytes", Xattr({{kUserObj, 6, kNoId}, {kGroupObj, 4, kNoId}, {kOther, 4, kNoId}}) + "xx", EINVAL},
      {"perm 8", Xattr({{kUserObj, 8, kNoId}, {kGroupObj, 4, kNoId}, {kOther, 4, kNoId}}), EINVAL},
      {"unknown tag", Xattr({{kUserObj, 6, kNoId}, {0x40, 4, kNoId}, {kOther, 4, kNoId}}), EINVAL},
      {"no other", Xattr({{kUserObj, 6, kNoId}, {kGroupObj, 4, kNoId}}), EINVAL},
      {"no owner", Xattr({{kGroupObj, 4, kNoId}, {kOther, 4, kNoId}}), EINVAL},
      {"two owners", Xattr({{kUserObj, 6, kNoId}, {kUserObj, 6, kNoId}, {kGroupObj, 4, kNoId}, {kOther, 4, kNoId}}),
       EINVAL},
      {"group before user", Xattr({{kUserObj, 6, kNoId}, {kGroupObj, 4, kNoId}, {kUser, 6, 5}, {kMask, 6, kNoId},
                                   {kOther, 4, kNoId}}),
       EINVAL},
      {"named without mask", Xattr({{kUserObj, 6, kNoId}, {kUser, 6, 5}, {kGroupObj, 4, kNoId}, {kOther, 4, kNoId}}),
       EINVAL},
      {"named user without id", Xattr({{kUserObj, 6, kNoId}, {kUser, 6, kNoId}, {kGroupObj, 4, kNoId},
                                       {kMask, 6, kNoId}, {kOther, 4, kNoId}}),
       EINVAL},
      {"entry after other", Xattr({{kUserObj, 6, kNoId}, {kGroupObj, 4, kNoId}, {kOther, 4, kNoId}, {kMask, 4, kNoId}}),
       EINVAL},
  };
  for (const auto& c : cases) {
    auto r = Acl::Parse(c.value);
    EXPECT_EQ(r.status().code(), c.err) << c.what;
  }
  // A mask without named entries is valid (and not minimal), as are repeated named ids.
  EXPECT_FALSE(Must(Xattr({{kUserObj, 6, kNoId}, {kGroupObj, 4, kNoId}, {kMask, 4, kNoId}, {kOther, 4, kNoId}}))
                   .IsMinimal());
  EXPECT_EQ(Must(Xattr({{kUserObj, 6, kNoId}, {kUser, 4, 5}, {kUser, 6, 5}, {kGroupObj, 4, kNoId}, {kMask, 6, kNoId},
                        {kOther, 4, kNoId}}))
                .entries.size(),
            6u);
}

TEST(AclMode, MinimalAclIsTheMode) {
  Acl acl = Acl::FromMode(0751);
  EXPECT_TRUE(acl.IsMinimal());
  EXPECT_EQ(acl.Encode(), Xattr({{kUserObj, 7, kNoId}, {kGroupObj, 5, kNoId}, {kOther, 1, kNoId}}));
  EXPECT_EQ(acl.ApplyToMode(S_IFREG | 04000), S_IFREG | 04751u);
}

TEST(AclMode, GroupBitsAreTheMaskWhenThereIsOne) {
  Acl acl = Must(Full());
  EXPECT_FALSE(acl.IsMinimal());
  EXPECT_EQ(acl.ApplyToMode(S_IFDIR | 01777), S_IFDIR | 01660u);
}

TEST(AclMode, ChmodRewritesOwnerMaskAndOther) {
  Acl acl = Must(Full());
  acl.Chmod(0705);
  EXPECT_EQ(acl.Encode(), Xattr({{kUserObj, 7, kNoId},
                                 {kUser, 6, 1000},
                                 {kGroupObj, 4, kNoId},
                                 {kGroup, 7, 2000},
                                 {kMask, 0, kNoId},
                                 {kOther, 5, kNoId}}));
  Acl minimal = Acl::FromMode(0644);
  minimal.Chmod(0570);
  EXPECT_EQ(minimal.Encode(), Acl::FromMode(0570).Encode());  // no mask: the owning group
}

TEST(AclMode, CreateFromDefaultAclLimitsByTheRequestedMode) {
  // Default ACL u::rwx, u:1000:rwx, g::r-x, m::rwx, o::r-x (setfacl -d -m u:1000:rwx).
  std::string def = Xattr({{kUserObj, 7, kNoId}, {kUser, 7, 1000}, {kGroupObj, 5, kNoId}, {kMask, 7, kNoId},
                           {kOther, 5, kNoId}});
  Acl file = Must(def);
  EXPECT_EQ(file.MaskForCreate(S_IFREG | 0666), S_IFREG | 0664u);
  EXPECT_EQ(file.Encode(), Xattr({{kUserObj, 6, kNoId}, {kUser, 7, 1000}, {kGroupObj, 5, kNoId}, {kMask, 6, kNoId},
                                  {kOther, 4, kNoId}}));
  Acl dir = Must(def);
  EXPECT_EQ(dir.MaskForCreate(S_IFDIR | 02777), S_IFDIR | 02775u);
  EXPECT_EQ(dir.Encode(), def);
  Acl minimal = Acl::FromMode(0750);  // no mask: the owning group entry is limited
  EXPECT_EQ(minimal.MaskForCreate(S_IFREG | 0644), S_IFREG | 0640u);
  EXPECT_EQ(minimal.Encode(), Acl::FromMode(0640).Encode());
}

TEST(AclAccess, WithoutAclTheModeDecides) {
  Attr a = File(0640, 1000, 2000);
  EXPECT_TRUE(CheckAccess(User(1000, 1), a, nullptr, R_OK | W_OK).ok());
  EXPECT_TRUE(CheckAccess(User(7, 7, {2000}), a, nullptr, R_OK).ok());
  EXPECT_EQ(CheckAccess(User(7, 7, {2000}), a, nullptr, W_OK).code(), EACCES);
  EXPECT_EQ(CheckAccess(User(7, 7), a, nullptr, R_OK).code(), EACCES);
  Acl none;
  EXPECT_EQ(CheckAccess(User(7, 7), a, &none, R_OK).code(), EACCES);
}

TEST(AclAccess, RootRules) {
  Acl acl = Must(Full());
  Ctx root = Ctx::Root();
  EXPECT_TRUE(CheckAccess(root, File(0000), &acl, R_OK | W_OK).ok());
  EXPECT_EQ(CheckAccess(root, File(0660), &acl, X_OK).code(), EACCES);
  EXPECT_TRUE(CheckAccess(root, File(0661), &acl, X_OK).ok());
  Attr dir = File(0);
  dir.mode = S_IFDIR;
  EXPECT_TRUE(CheckAccess(root, dir, &acl, X_OK).ok());
}

TEST(AclAccess, NamedUserIsLimitedByTheMask) {
  // Owner 0:0, mode 0660 (owner rw, mask rw, other ---).
  Attr a = File(0660);
  Acl acl = Must(Xattr({{kUserObj, 6, kNoId}, {kUser, 7, 1000}, {kGroupObj, 0, kNoId}, {kMask, 6, kNoId},
                        {kOther, 0, kNoId}}));
  EXPECT_TRUE(CheckAccess(User(1000, 1000), a, &acl, R_OK | W_OK).ok());
  EXPECT_EQ(CheckAccess(User(1000, 1000), a, &acl, X_OK).code(), EACCES);  // rwx & mask rw-
  EXPECT_EQ(CheckAccess(User(1001, 1001), a, &acl, R_OK).code(), EACCES);
  // The named user entry wins over group entries, even a more generous one.
  Acl mine = Must(Xattr({{kUserObj, 6, kNoId}, {kUser, 0, 1000}, {kGroupObj, 6, kNoId}, {kMask, 6, kNoId},
                         {kOther, 6, kNoId}}));
  EXPECT_EQ(CheckAccess(User(1000, 0), a, &mine, R_OK).code(), EACCES);
}

TEST(AclAccess, AnEmptyMaskLeavesItToTheMode) {
  // u::rw-, u:1000:rwx, g::---, g:2000:---, m::---, o::r-- (mode 0604): as in the kernel,
  // the ACL is not consulted, so neither the named user nor the matching group entry
  // takes away what other grants.
  Attr a = File(0604);
  Acl acl = Must(Xattr({{kUserObj, 6, kNoId}, {kUser, 7, 1000}, {kGroupObj, 0, kNoId}, {kGroup, 0, 2000},
                        {kMask, 0, kNoId}, {kOther, 4, kNoId}}));
  EXPECT_TRUE(CheckAccess(User(1000, 1000), a, &acl, R_OK).ok());
  EXPECT_TRUE(CheckAccess(User(1002, 1002, {2000}), a, &acl, R_OK).ok());
  EXPECT_EQ(CheckAccess(User(1000, 1000), a, &acl, W_OK).code(), EACCES);
  EXPECT_EQ(CheckAccess(User(1002, 0), a, &acl, R_OK).code(), EACCES);  // the owning group: g::---
}

TEST(AclAccess, OwnerUsesTheOwnerEntryAlone) {
  Attr a = File(0070, 1000, 1000);
  Acl acl = Must(Xattr({{kUserObj, 0, kNoId}, {kUser, 7, 1000}, {kGroupObj, 7, kNoId}, {kMask, 7, kNoId},
                        {kOther, 7, kNoId}}));
  EXPECT_EQ(CheckAccess(User(1000, 1000), a, &acl, R_OK).code(), EACCES);
}

TEST(AclAccess, GroupsNeedOneEntryGrantingEverything) {
  Attr a = File(0670, 0, 50);
  Acl acl = Must(Xattr({{kUserObj, 6, kNoId},
                        {kGroupObj, 4, kNoId},
                        {kGroup, 2, 2000},
                        {kGroup, 7, 3000},
                        {kMask, 6, kNoId},
                        {kOther, 7, kNoId}}));
  int loads = 0;
  // Supplementary groups come from load_groups, read once and only when needed.
  Ctx two = User(1000, 1000, {2000, 3000}, &loads);
  EXPECT_TRUE(CheckAccess(two, a, &acl, R_OK | W_OK).ok());      // g:3000 grants rw (rwx & mask)
  EXPECT_EQ(CheckAccess(two, a, &acl, X_OK).code(), EACCES);      // masked away
  EXPECT_EQ(loads, 1);
  // Member of 2000 only: that entry matches but does not grant read, and other (rwx) is
  // not consulted once a group entry matched.
  Ctx one = User(1000, 1000, {2000});
  EXPECT_TRUE(CheckAccess(one, a, &acl, W_OK).ok());
  EXPECT_EQ(CheckAccess(one, a, &acl, R_OK).code(), EACCES);
  // Owning group through the primary gid.
  Ctx owning = User(1000, 50);
  EXPECT_TRUE(CheckAccess(owning, a, &acl, R_OK).ok());
  EXPECT_EQ(CheckAccess(owning, a, &acl, W_OK).code(), EACCES);
  // In no group of the ACL: other, unmasked.
  int none_loads = 0;
  Ctx stranger = User(1000, 1000, {9}, &none_loads);
  EXPECT_TRUE(CheckAccess(stranger, a, &acl, R_OK | W_OK | X_OK).ok());
  // The owner is judged without loading groups.
  int owner_loads = 0;
  EXPECT_TRUE(CheckAccess(User(5, 5, {}, &owner_loads), File(0600, 5, 5), &acl, R_OK).ok());
  EXPECT_EQ(owner_loads, 0);
}

}  // namespace
}  // namespace tierfs::acl
