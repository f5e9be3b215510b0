// The trash (meta_trash.cc), against every engine.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "common/clock.h"
#include "meta/key_schema.h"
#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

constexpr int64_t kDayNs = 24ll * 3600 * 1000000000;

void TrashOn(Meta* m, int days = 1) {
  ASSERT_TRUE(Meta::UpdateFormat(m->engine(), [&](FormatRecord& r) {
                r.trash_days = days;
                return Status::OK();
              }).ok());
  // ExpireTrash rereads the retention, as the background does every minute.
  ASSERT_TRUE(m->ExpireTrash(NowNanos()).ok());
  ASSERT_EQ(m->TrashOn(), days > 0);
}

std::vector<DirEntry> TrashHour(Meta* m) {
  const Ctx root = Ctx::Root();
  auto trash = m->Lookup(root, kRootIno, ".trash");
  EXPECT_TRUE(trash.ok()) << trash.status().ToString();
  if (!trash.ok()) return {};
  auto hours = m->Readdir(root, trash->first, false);
  EXPECT_TRUE(hours.ok());
  EXPECT_EQ(hours->size(), 1u);
  if (hours->size() != 1) return {};
  EXPECT_EQ((*hours)[0].name, Meta::TrashHourName(NowNanos()));
  auto entries = m->Readdir(root, (*hours)[0].ino, true);
  EXPECT_TRUE(entries.ok());
  return *entries;
}

// Removals into an existing hour directory leave the trash's record alone, and the hour
// directory's within the same second: every removal rewriting them made concurrent
// removals of unrelated files conflict on those two keys.
TYPED_TEST(MetaTest, RemovalsIntoTheTrashRewriteItsDirectoriesOnlyWhenTheyChange) {
  TrashOn(this->m_.get());
  for (const char* n : {"a", "b", "c"}) this->File(n);
  int64_t t0 = NowNanos();
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "a").ok());  // makes the hour directory
  auto hour = this->m_->Lookup(this->root_, kTrashIno, Meta::TrashHourName(NowNanos()));
  ASSERT_TRUE(hour.ok()) << hour.status().ToString();
  auto raw = [&](Ino ino) {
    std::string v;
    EXPECT_TRUE(this->m_->engine()
                    ->Txn(
                        [&](KvTxn& t) -> Status {
                          ASSIGN_OR_RETURN(auto got, t.Get(keys::Inode(ino)));
                          v = got.value_or("");
                          return Status::OK();
                        },
                        true)
                    .ok());
    return v;
  };
  // The hour directory was just made, so the next removal falls within a second of its
  // times unless the machine stalls for half of one (then only that check is skipped).
  std::string trash_before = raw(kTrashIno), hour_before = raw(hour->first);
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "b").ok());
  bool same_second = NowNanos() - t0 < 900'000'000;
  EXPECT_EQ(raw(kTrashIno), trash_before);
  if (same_second) {
    EXPECT_EQ(raw(hour->first), hour_before);
  }
  // A directory changes the hour directory's link count: that is written.
  this->Dir("d");
  ASSERT_TRUE(this->m_->Rmdir(this->root_, kRootIno, "d").ok());
  auto ha = this->m_->GetAttr(hour->first);
  ASSERT_TRUE(ha.ok());
  EXPECT_EQ(ha->nlink, 3u);
  EXPECT_EQ(raw(kTrashIno), trash_before);
  EXPECT_EQ(TrashHour(this->m_.get()).size(), 3u);
}

TYPED_TEST(MetaTest, RemovedTreeGoesToTheTrashAndComesBackWhole) {
  TrashOn(this->m_.get());
  Ino top = this->Dir("top");
  Ino sub = this->Dir("sub", top);
  Ino f = this->File("f", sub);
  uint64_t slice = 0;
  this->WriteSlice(f, 0, 0, 10000, &slice);
  Ino g = this->File("g");
  auto before = this->m_->GetStatFs();
  // rm -rf top; rm g
  ASSERT_TRUE(this->m_->Unlink(this->root_, sub, "f").ok());
  ASSERT_TRUE(this->m_->Rmdir(this->root_, top, "sub").ok());
  ASSERT_TRUE(this->m_->Rmdir(this->root_, kRootIno, "top").ok());
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "g").ok());
  for (const char* gone : {"top", "g"}) EXPECT_EQ(this->Err(this->m_->Lookup(this->root_, kRootIno, gone)), ENOENT);
  // The root does not list the trash.
  auto root_entries = this->m_->Readdir(this->root_, kRootIno, false);
  ASSERT_TRUE(root_entries.ok());
  for (const auto& e : *root_entries) EXPECT_NE(e.name, ".trash");

  auto entries = TrashHour(this->m_.get());
  std::set<std::string> names;
  for (const auto& e : entries) {
    names.insert(e.name);
    EXPECT_TRUE(e.attr.flags & kAttrInTrash) << e.name;
  }
  std::set<std::string> want = {std::to_string(sub) + "-" + std::to_string(f) + "-f",
                                std::to_string(top) + "-" + std::to_string(sub) + "-sub",
                                "1-" + std::to_string(top) + "-top", "1-" + std::to_string(g) + "-g"};
  EXPECT_EQ(names, want);
  // Nothing was freed: the volume still holds it, the slice is not pending deletion.
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  auto during = this->m_->GetStatFs();
  EXPECT_EQ(during->used_bytes, before->used_bytes);
  EXPECT_EQ(during->inodes, before->inodes);
  auto pending_now = this->m_->PendingSlices();
  ASSERT_TRUE(pending_now.ok());
  for (auto& [id, size] : *pending_now) EXPECT_NE(id, slice);

  // Restore: a file whose directory is still in the trash waits for it.
  const std::string hour = Meta::TrashHourName(NowNanos());
  EXPECT_EQ(this->Err(this->m_->RestoreFromTrash(this->root_, hour, std::to_string(sub) + "-" + std::to_string(f) + "-f")),
            EAGAIN);
  for (const std::string& e : {"1-" + std::to_string(top) + "-top", std::to_string(top) + "-" + std::to_string(sub) + "-sub",
                               std::to_string(sub) + "-" + std::to_string(f) + "-f", "1-" + std::to_string(g) + "-g"}) {
    ASSERT_TRUE(this->m_->RestoreFromTrash(this->root_, hour, e).ok()) << e;
  }
  auto t = this->m_->Lookup(this->root_, kRootIno, "top");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->second.nlink, 3u);
  auto back = this->m_->Lookup(this->root_, sub, "f");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->first, f);
  EXPECT_EQ(back->second.length, 10000u);
  EXPECT_FALSE(back->second.flags & kAttrInTrash);
  auto recs = this->m_->ReadChunk(f, 0);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 1u);
  EXPECT_EQ((*recs)[0].id, slice);
  EXPECT_TRUE(TrashHour(this->m_.get()).empty());
  auto after = this->m_->GetStatFs();
  EXPECT_EQ(after->used_bytes, before->used_bytes);
  EXPECT_EQ(after->inodes, before->inodes);
}

TYPED_TEST(MetaTest, RestoreRefusesToOverwrite) {
  TrashOn(this->m_.get());
  Ino f = this->File("f");
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  Ino again = this->File("f");
  const std::string entry = "1-" + std::to_string(f) + "-f";
  EXPECT_EQ(this->Err(this->m_->RestoreFromTrash(this->root_, Meta::TrashHourName(NowNanos()), entry)), EEXIST);
  EXPECT_EQ(this->m_->Lookup(this->root_, kRootIno, "f")->first, again);
  EXPECT_EQ(TrashHour(this->m_.get()).size(), 1u);
  EXPECT_EQ(this->Err(this->m_->RestoreFromTrash(this->root_, "1999-01-01-00", entry)), ENOENT);
}

TYPED_TEST(MetaTest, AReplacingRenameAndRmrSendToTheTrash) {
  TrashOn(this->m_.get());
  Ino old = this->File("target");
  this->File("new");
  ASSERT_TRUE(this->m_->Rename(this->root_, kRootIno, "new", kRootIno, "target", 0).ok());
  Ino d = this->Dir("d");
  for (int i = 0; i < 5; ++i) this->File("x" + std::to_string(i), d);
  auto p = this->m_->RemoveContents(this->root_, d, 1000);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->done);
  auto entries = TrashHour(this->m_.get());
  EXPECT_EQ(entries.size(), 6u);
  bool found = false;
  for (const auto& e : entries) found |= e.ino == old && e.name == "1-" + std::to_string(old) + "-target";
  EXPECT_TRUE(found);
  // A second link going is no removal: only the last one goes to the trash.
  Ino h = this->File("h");
  ASSERT_TRUE(this->m_->Link(this->root_, h, kRootIno, "h2").ok());
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "h").ok());
  EXPECT_EQ(TrashHour(this->m_.get()).size(), 6u);
}

TYPED_TEST(MetaTest, ARenameMayDeleteWhatItReplacesInsteadOfTrashingIt) {
  // The gateway's multipart parts: one sent again replaces the old one for good.
  TrashOn(this->m_.get());
  Ino old = this->File("part");
  this->File("again");
  RenameCondition cond;
  cond.no_trash = true;
  ASSERT_TRUE(this->m_->Rename(this->root_, kRootIno, "again", kRootIno, "part", 0, &cond).ok());
  EXPECT_EQ(this->m_->GetAttr(old).status().code(), ENOENT);
  auto trash = this->m_->Lookup(this->root_, kRootIno, ".trash");
  if (trash.ok()) {
    auto hours = this->m_->Readdir(this->root_, trash->first, false);
    ASSERT_TRUE(hours.ok());
    for (const auto& h : *hours) EXPECT_TRUE(this->m_->Readdir(this->root_, h.ino, false)->empty());
  }
}

TYPED_TEST(MetaTest, TheTrashIsReadOnlyAndPrivate) {
  TrashOn(this->m_.get());
  Ctx alice;
  alice.uid = alice.gid = 1000;
  Ctx bob;
  bob.uid = bob.gid = 1001;
  Ino pub = this->Dir("pub", kRootIno, 0777);
  auto f = this->m_->Mknod(alice, pub, "f", S_IFREG | 0644, 0);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(this->m_->Unlink(alice, pub, "f").ok());
  auto entries = TrashHour(this->m_.get());
  ASSERT_EQ(entries.size(), 1u);
  Ino hour = entries[0].attr.parent;
  // Only the owner and root may read it (its mode said others could).
  EXPECT_TRUE(this->m_->Open(alice, f->first, O_RDONLY).ok());
  EXPECT_TRUE(this->m_->Open(this->root_, f->first, O_RDONLY).ok());
  EXPECT_EQ(this->Err(this->m_->Open(bob, f->first, O_RDONLY)), EACCES);
  // Nobody writes, renames into or creates in it, root included.
  EXPECT_EQ(this->Err(this->m_->Open(this->root_, f->first, O_RDWR)), EPERM);
  EXPECT_EQ(this->Err(this->m_->Open(alice, f->first, O_WRONLY)), EPERM);
  Attr in;
  in.mode = 0600;
  EXPECT_EQ(this->Err(this->m_->SetAttr(this->root_, f->first, kSetMode, in)), EPERM);
  EXPECT_EQ(this->Err(this->m_->Mknod(this->root_, hour, "new", S_IFREG | 0644, 0)), EPERM);
  EXPECT_EQ(this->Err(this->m_->Mkdir(this->root_, kTrashIno, "2000-01-01-00", 0755)), EPERM);
  EXPECT_EQ(this->Err(this->m_->Mknod(this->root_, kRootIno, ".trash", S_IFREG | 0644, 0)), EPERM);
  this->File("g");
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, kRootIno, "g", hour, "g", 0)), EPERM);
  EXPECT_EQ(this->Err(this->m_->Link(this->root_, f->first, kRootIno, "back")), EPERM);
  // Bob may not restore Alice's file; she may.
  EXPECT_EQ(this->Err(this->m_->RestoreFromTrash(bob, Meta::TrashHourName(NowNanos()), entries[0].name)), EACCES);
  EXPECT_TRUE(this->m_->RestoreFromTrash(alice, Meta::TrashHourName(NowNanos()), entries[0].name).ok());
  // Root purges an entry for good: removing inside the trash does not trash again.
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "g").ok());
  entries = TrashHour(this->m_.get());
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_TRUE(this->m_->Unlink(this->root_, hour, entries[0].name).ok());
  EXPECT_TRUE(TrashHour(this->m_.get()).empty());
}

// An hour of the trash lists, for a user, only what that user owns; root sees everything.
// Bob's file removed from his private directory is not a name Alice may learn.
TYPED_TEST(MetaTest, ATrashHourShowsEachUserOnlyTheirOwnEntries) {
  TrashOn(this->m_.get());
  Ctx alice;
  alice.uid = alice.gid = 1000;
  Ctx bob;
  bob.uid = bob.gid = 1001;
  Ino pub = this->Dir("pub", kRootIno, 0777);
  auto bobs_dir = this->m_->Mkdir(bob, pub, "private", 0700);
  ASSERT_TRUE(bobs_dir.ok());
  ASSERT_TRUE(this->m_->Mknod(bob, bobs_dir->first, "salary-2026.xlsx", S_IFREG | 0600, 0).ok());
  ASSERT_TRUE(this->m_->Mknod(alice, pub, "alice.txt", S_IFREG | 0644, 0).ok());
  ASSERT_TRUE(this->m_->Unlink(bob, bobs_dir->first, "salary-2026.xlsx").ok());
  ASSERT_TRUE(this->m_->Unlink(alice, pub, "alice.txt").ok());
  auto all = TrashHour(this->m_.get());
  ASSERT_EQ(all.size(), 2u);
  Ino hour = all[0].attr.parent;
  auto names = [&](const Ctx& who, bool plus) {
    std::set<std::string> out;
    auto r = this->m_->Readdir(who, hour, plus);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const auto& e : *r) out.insert(e.name.substr(e.name.find('-', e.name.find('-') + 1) + 1));
    }
    return out;
  };
  for (bool plus : {false, true}) {
    EXPECT_EQ(names(alice, plus), std::set<std::string>{"alice.txt"});
    EXPECT_EQ(names(bob, plus), std::set<std::string>{"salary-2026.xlsx"});
    EXPECT_EQ(names(this->root_, plus), (std::set<std::string>{"alice.txt", "salary-2026.xlsx"}));
  }
  for (const auto& e : all) {
    bool bobs = e.name.ends_with("salary-2026.xlsx");
    EXPECT_EQ(this->Err(this->m_->Lookup(alice, hour, e.name)), bobs ? ENOENT : 0) << e.name;
    EXPECT_EQ(this->Err(this->m_->Lookup(bob, hour, e.name)), bobs ? 0 : ENOENT) << e.name;
    EXPECT_TRUE(this->m_->Lookup(this->root_, hour, e.name).ok()) << e.name;
  }
}

TYPED_TEST(MetaTest, TrashExpiryDeletesOldHoursAndTheirBlocks) {
  TrashOn(this->m_.get(), 2);
  auto before = this->m_->GetStatFs();
  Ino d = this->Dir("d");
  Ino f = this->File("f", d);
  uint64_t slice = 0;
  this->WriteSlice(f, 0, 0, 8192, &slice);
  ASSERT_TRUE(this->m_->Unlink(this->root_, d, "f").ok());
  ASSERT_TRUE(this->m_->Rmdir(this->root_, kRootIno, "d").ok());
  const int64_t now = NowNanos();
  // Within the retention (2 days and the hour itself): kept.
  ASSERT_TRUE(this->m_->ExpireTrash(now + kDayNs).ok());
  EXPECT_EQ(TrashHour(this->m_.get()).size(), 2u);
  ASSERT_TRUE(this->m_->ExpireTrash(now + 2 * kDayNs - 3600ll * 1000000000).ok());
  EXPECT_EQ(TrashHour(this->m_.get()).size(), 2u);
  // Past it: the hour, its entries and (after the cleaner) the slice go.
  ASSERT_TRUE(this->m_->ExpireTrash(now + 2 * kDayNs + 3600ll * 1000000000).ok());
  auto trash = this->m_->Readdir(this->root_, kTrashIno, false);
  ASSERT_TRUE(trash.ok());
  EXPECT_TRUE(trash->empty());
  EXPECT_EQ(this->Err(this->m_->GetAttr(f)), ENOENT);
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  bool pending = false;
  auto pending_now = this->m_->PendingSlices();
  ASSERT_TRUE(pending_now.ok());
  for (auto& [id, size] : *pending_now) pending |= id == slice;
  EXPECT_TRUE(pending);
  auto after = this->m_->GetStatFs();
  EXPECT_EQ(after->used_bytes, before->used_bytes);
  EXPECT_EQ(after->inodes, before->inodes);
  auto usage = this->m_->GetTrashUsage();
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->entries, 0u);
  // Turning the trash off (0 days) empties it at the next round.
  Ino g = this->File("g");
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "g").ok());
  EXPECT_EQ(this->m_->GetTrashUsage()->entries, 1u);
  TrashOn(this->m_.get(), 0);
  EXPECT_EQ(this->m_->GetTrashUsage()->entries, 0u);
  EXPECT_EQ(this->Err(this->m_->GetAttr(g)), ENOENT);
}

TYPED_TEST(MetaTest, ATrashedFileIsAnUnlinkedFileToThoseWhoHadIt) {
  // Reached outside the trash (a name resolved or a descriptor opened before the removal,
  // a file handle made before it), a file whose last name went to the trash behaves as an
  // unlinked file: its mode decides who may open it for writing, chmod and truncate work.
  // Through the trash it stays read-only and private.
  TrashOn(this->m_.get());
  Ctx alice;
  alice.uid = alice.gid = 1000;
  Ctx alice_had = alice;
  alice_had.outside_trash = true;
  Ino pub = this->Dir("pub", kRootIno, 0777);
  auto f = this->m_->Mknod(alice, pub, "lock", S_IFREG | 0644, 0);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(this->m_->Open(alice, f->first, O_RDWR).ok());  // held open across the removal
  ASSERT_TRUE(this->m_->Unlink(alice, pub, "lock").ok());
  ASSERT_EQ(TrashHour(this->m_.get()).size(), 1u);
  EXPECT_EQ(this->Err(this->m_->Open(alice, f->first, O_WRONLY)), EPERM);
  ASSERT_TRUE(this->m_->Open(alice_had, f->first, O_WRONLY).ok());
  ASSERT_TRUE(this->m_->Release(f->first).ok());
  Attr in;
  in.mode = 0600;
  in.length = 10;
  EXPECT_EQ(this->Err(this->m_->SetAttr(alice, f->first, kSetMode, in)), EPERM);
  auto a = this->m_->SetAttr(alice_had, f->first, kSetMode | kSetSize, in);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mode & 07777, 0600u);
  EXPECT_EQ(a->length, 10u);
  // The trash and its hours are never changed that way.
  Attr dir_mode;
  dir_mode.mode = 0777;
  EXPECT_EQ(this->Err(this->m_->SetAttr(alice_had, a->parent, kSetMode, dir_mode)), EPERM);
  // A file handle made before the removal ("." lookups, outside the trash) resolves while
  // the file is open somewhere, and is stale once it is not; through the trash it resolves.
  EXPECT_TRUE(this->m_->Lookup(alice_had, f->first, ".").ok());
  auto other = this->Open(false);  // another client sees this client's hold
  EXPECT_TRUE(other->Lookup(alice_had, f->first, ".").ok());
  ASSERT_TRUE(this->m_->Release(f->first).ok());
  EXPECT_EQ(this->Err(this->m_->Lookup(alice_had, f->first, ".")), ENOENT);
  EXPECT_EQ(this->Err(other->Lookup(alice_had, f->first, ".")), ENOENT);
  EXPECT_TRUE(this->m_->Lookup(alice, f->first, ".").ok());
}

TYPED_TEST(MetaTest, OpeningARemovedInodeIsStale) {
  // The kernel resolved a name, then it was removed (not open anywhere): the open says
  // ESTALE, so the kernel looks the name up again (and open(O_CREAT) creates it anew).
  Ino f = this->File("f");
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  EXPECT_EQ(this->Err(this->m_->Open(this->root_, f, O_RDWR)), ESTALE);
}

}  // namespace
}  // namespace tierfs
