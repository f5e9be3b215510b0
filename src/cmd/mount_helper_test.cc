// mount.tierfs's translation of mount(8) command lines (mount_helper.h).
#include "cmd/mount_helper.h"

#include <gtest/gtest.h>

namespace tierfs::cmd {
namespace {

using V = std::vector<std::string>;

// A few of `tierfs mount`'s options, as main.cc would report them.
MountOptionKind Kind(const std::string& name) {
  if (name == "cache-dir" || name == "cache-size" || name == "log" || name == "subdir") return MountOptionKind::kValue;
  if (name == "writeback" || name == "read-only" || name == "no-sync-blocks") return MountOptionKind::kFlag;
  return MountOptionKind::kUnknown;
}

V Args(const V& argv) {
  auto r = MountHelperArgs(argv, Kind);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->args : V{};
}

TEST(MountHelper, FstabLineBecomesABackgroundMount) {
  EXPECT_EQ(Args({"sqlite3:///v.db", "/mnt/data", "-o", "rw,_netdev,cache-dir=/nvme/tierfs"}),
            (V{"sqlite3:///v.db", "/mnt/data", "-d", "--cache-dir", "/nvme/tierfs"}));
}

TEST(MountHelper, OptionsOfMountAndFstabAreDropped) {
  EXPECT_EQ(Args({"sqlite3:///v.db", "/m", "-o",
                  "defaults,auto,noauto,user,nouser,users,nofail,_netdev,rw,x-systemd.automount,"
                  "x-systemd.requires=redis.service,comment=x"}),
            (V{"sqlite3:///v.db", "/m", "-d"}));
}

TEST(MountHelper, FlagsRoUnderscoresAndFuseOptions) {
  EXPECT_EQ(Args({"redis://h:6379/1", "/m", "-o", "ro,writeback,cache_size=10G,allow_other,max_read=131072,nosuid"}),
            (V{"redis://h:6379/1", "/m", "-d", "--read-only", "--writeback", "--cache-size", "10G", "-o",
               "allow_other,max_read=131072,nosuid"}));
}

TEST(MountHelper, HelperFlagsAndOptionPlacement) {
  auto r = MountHelperArgs({"-sfnv", "sqlite3:///v.db", "-t", "tierfs", "/m", "-olog=/var/log/t.log"}, Kind);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->fake);
  EXPECT_TRUE(r->verbose);
  EXPECT_EQ(r->args, (V{"sqlite3:///v.db", "/m", "-d", "--log", "/var/log/t.log"}));
  r = MountHelperArgs({"redis://h:6379/1", "/m", "-o", "meta-password-file=/etc/tierfs/pw"}, Kind);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->meta_password_file, "/etc/tierfs/pw");
  EXPECT_EQ(r->args, (V{"redis://h:6379/1", "/m", "-d"}));
}

TEST(MountHelper, ErrorsSayWhatIsWrong) {
  auto r = MountHelperArgs({"sqlite3:///v.db", "/m", "-o", "cache-dir"}, Kind);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cache-dir needs a value"), std::string::npos) << r.status().message();
  r = MountHelperArgs({"sqlite3:///v.db", "/m", "-o", "writeback=1"}, Kind);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a flag"), std::string::npos);
  EXPECT_FALSE(MountHelperArgs({"sqlite3:///v.db"}, Kind).ok());
  EXPECT_FALSE(MountHelperArgs({"sqlite3:///v.db", "/m", "-x"}, Kind).ok());
  EXPECT_FALSE(MountHelperArgs({"sqlite3:///v.db", "/m", "-o"}, Kind).ok());
}

TEST(MountHelper, FstabFieldRoundTrips) {
  auto f = FstabOptionsField({"cache-dir=/nvme/tierfs", "writeback", "ro", "allow_other"});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, "_netdev,cache-dir=/nvme/tierfs,writeback,ro,allow_other");
  EXPECT_EQ(Args({"sqlite3:///v.db", "/m", "-o", *f}),
            (V{"sqlite3:///v.db", "/m", "-d", "--cache-dir", "/nvme/tierfs", "--writeback", "--read-only", "-o",
               "allow_other"}));
  EXPECT_FALSE(FstabOptionsField({"log=/a b"}).ok());
  EXPECT_FALSE(FstabOptionsField({"cache-dir=/a,b"}).ok());
}

}  // namespace
}  // namespace tierfs::cmd
