// Where a mirror's writing client's transactions run (forward_writes.h), on two in-memory
// engines: writes on the primary; reads on the mirror once it holds what the client wrote
// or saw, and only of keys it holds; the primary's identity never written from a mirror.
#include "mirror/forward_writes.h"

#include <gtest/gtest.h>

#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/mem_engine.h"
#include "meta/mirror_state.h"

namespace tierfs::mirror {
namespace {

struct Engines {
  MemEngine* mirror;
  MemEngine* primary;
  std::unique_ptr<KvEngine> fwd;
};

Engines Make() {
  auto m = std::make_unique<MemEngine>("mirror");
  auto p = std::make_unique<MemEngine>("primary");
  Engines e{m.get(), p.get(), nullptr};
  e.fwd = ForwardWrites(std::move(m), WithChangeLog(std::move(p)));
  return e;
}

Status Put(KvEngine* e, const std::string& k, const std::string& v) {
  return e->Txn([&](KvTxn& t) { return t.Put(k, v); }, false);
}

std::optional<std::string> Get(KvEngine* e, const std::string& k) {
  std::optional<std::string> out;
  EXPECT_TRUE(e->Txn(
                   [&](KvTxn& t) -> Status {
                     ASSIGN_OR_RETURN(out, t.Get(k));
                     return Status::OK();
                   },
                   true)
                  .ok());
  return out;
}

void SetApplied(MemEngine* mirror, uint64_t applied) {
  MirrorState s;
  s.applied = applied;
  s.seeding = false;
  ASSERT_TRUE(mirror->Txn([&](KvTxn& t) { return WriteMirrorState(t, s); }, false).ok());
}

TEST(ForwardWrites, ReadsItsOwnWritesAndThenTheMirrorOnceItCaughtUp) {
  Engines e = Make();
  SetApplied(e.mirror, 0);
  const std::string k = keys::Inode(7);
  ASSERT_TRUE(Put(e.fwd.get(), k, "written").ok());
  EXPECT_FALSE(Get(e.mirror, k).has_value());    // the write went to the primary...
  EXPECT_EQ(Get(e.primary, k), "written");
  EXPECT_EQ(Get(e.fwd.get(), k), "written");     // ...and is read back from it
  // The replicator applies it (the record is sequence 1) with a value of its own here, so
  // the test can tell who answers.
  ASSERT_TRUE(Put(e.mirror, k, "from the mirror").ok());
  SetApplied(e.mirror, 1);
  EXPECT_EQ(Get(e.fwd.get(), k), "from the mirror");
  // The next write sends reads to the primary again until the mirror holds sequence 2.
  ASSERT_TRUE(Put(e.fwd.get(), keys::Inode(8), "second").ok());
  EXPECT_EQ(Get(e.fwd.get(), k), "written");
  SetApplied(e.mirror, 2);
  EXPECT_EQ(Get(e.fwd.get(), k), "from the mirror");
}

TEST(ForwardWrites, AReadOnThePrimaryKeepsTheMirrorAwayUntilItHoldsThatToo) {
  Engines e = Make();
  SetApplied(e.mirror, 0);
  // Another client of the primary commits twice; this one reads a key the mirror does not
  // hold (a counter), which runs on the primary and sees sequence 2.
  ASSERT_TRUE(e.primary->Txn([](KvTxn& t) { return t.Put(keys::Counter("changeSeq"), keys::EncodeU64(2)); }, false)
                  .ok());
  ASSERT_TRUE(Put(e.primary, keys::Inode(9), "new on the primary").ok());
  ASSERT_TRUE(Put(e.primary, keys::Counter("usedSpace"), keys::EncodeU64(5)).ok());
  EXPECT_EQ(Get(e.fwd.get(), keys::Counter("usedSpace")), keys::EncodeU64(5));
  // The mirror at sequence 1 does not answer: what this client saw would go back in time.
  SetApplied(e.mirror, 1);
  EXPECT_EQ(Get(e.fwd.get(), keys::Inode(9)), "new on the primary");
  SetApplied(e.mirror, 2);
  EXPECT_FALSE(Get(e.fwd.get(), keys::Inode(9)).has_value());  // the mirror answers (this test never applied it)
}

TEST(ForwardWrites, AWriteThePrimaryRefusedKeepsTheMirrorAwayUntilItHoldsWhatItSaw) {
  Engines e = Make();
  SetApplied(e.mirror, 4);
  ASSERT_TRUE(Put(e.primary, keys::Counter("changeSeq"), keys::EncodeU64(5)).ok());
  ASSERT_TRUE(Put(e.primary, keys::Dentry(1, "taken"), "primary's").ok());
  Status st = e.fwd->Txn(
      [](KvTxn& t) -> Status {
        ASSIGN_OR_RETURN(auto v, t.Get(keys::Dentry(1, "taken")));
        return v ? Status::Err(EEXIST, "taken") : t.Put(keys::Dentry(1, "taken"), "mine");
      },
      false);
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_EQ(Get(e.fwd.get(), keys::Dentry(1, "taken")), "primary's");  // not the mirror at 4
  SetApplied(e.mirror, 5);
  EXPECT_FALSE(Get(e.fwd.get(), keys::Dentry(1, "taken")).has_value());  // the mirror's (not applied here)
}

TEST(ForwardWrites, KeysTheMirrorDoesNotHoldAreReadOnThePrimary) {
  Engines e = Make();
  SetApplied(e.mirror, 0);
  ASSERT_TRUE(Put(e.mirror, keys::Dentry(1, "a"), "mirror").ok());
  ASSERT_TRUE(Put(e.primary, keys::Dentry(1, "a"), "primary").ok());
  ASSERT_TRUE(Put(e.mirror, keys::Counter("nextInode"), "mirror").ok());
  ASSERT_TRUE(Put(e.primary, keys::Counter("nextInode"), "primary").ok());
  EXPECT_EQ(Get(e.fwd.get(), keys::Dentry(1, "a")), "mirror");
  EXPECT_EQ(Get(e.fwd.get(), keys::Counter("nextInode")), "primary");
  // A scan within one kind of an inode's keys is the mirror's; one over all of an inode's
  // keys (its locks too) is not.
  EXPECT_TRUE(MirrorHoldsRange(keys::DentryPrefix(1), PrefixEnd(keys::DentryPrefix(1))));
  EXPECT_FALSE(MirrorHoldsRange("A", "B"));
  EXPECT_FALSE(MirrorHoldsRange(keys::DentryPrefix(1), PrefixEnd("A")));
  EXPECT_FALSE(MirrorHolds(keys::Flock(1, 2, 3)));
  EXPECT_TRUE(MirrorHolds(keys::Format()));
  EXPECT_TRUE(MirrorHolds(MirrorStateKey()));
}

TEST(ForwardWrites, NeverWritesThePrimarysFormatOrAMirrorsState) {
  Engines e = Make();
  SetApplied(e.mirror, 0);
  EXPECT_EQ(Put(e.fwd.get(), keys::Format(), "{}").code(), EPERM);
  EXPECT_EQ(Put(e.fwd.get(), MirrorStateKey(), "{}").code(), EPERM);
  EXPECT_EQ(e.fwd->Reset().code(), EPERM);
  EXPECT_FALSE(Get(e.primary, keys::Format()).has_value());
}

}  // namespace
}  // namespace tierfs::mirror
