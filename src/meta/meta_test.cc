// The metadata semantics suite: written once, run against every engine (typed tests).
#include "meta/attr.h"
#include "meta/meta.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "meta/kv_engine.h"
#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

// Resolves a chunk's records into what each byte of [0, n) reads as: (slice id, offset in
// slice), id 0 meaning zeros. Independent of the chunk layer on purpose.
std::vector<std::pair<uint64_t, uint32_t>> Resolve(const std::vector<SliceRecord>& recs, uint32_t n) {
  std::vector<std::pair<uint64_t, uint32_t>> out(n, {0, 0});
  for (const auto& r : recs) {
    for (uint32_t i = 0; i < r.len; ++i) {
      uint64_t p = static_cast<uint64_t>(r.pos) + i;
      if (p < n) out[p] = {r.id, r.id ? r.off + i : 0};
    }
  }
  return out;
}

// Inodes written before st_blocks followed the data (attr version 1) read as fully
// allocated, so old files never look sparse.
TEST(AttrEncoding, Version1DecodesAsFullyAllocated) {
  Attr a;
  a.mode = S_IFREG | 0644;
  a.length = 10000;
  a.allocated = 4096;
  std::string v2 = EncodeAttr(a);
  Attr back;
  ASSERT_TRUE(DecodeAttr(v2, &back));
  EXPECT_EQ(back.allocated, 4096u);
  std::string v1 = v2.substr(0, v2.size() - 8);
  v1[0] = 1;
  ASSERT_TRUE(DecodeAttr(v1, &back));
  EXPECT_EQ(back.allocated, 12288u);
  EXPECT_EQ(back.length, 10000u);
}

// Version 2 puts S3 checksum tables in object metadata; a client refuses versions it does
// not know rather than misreading the volume's objects.
TEST(FormatRecord, VersionsAndTheChecksumLayout) {
  FormatRecord rec;
  rec.name = "v";
  rec.storage = "s3";
  EXPECT_EQ(rec.version, kFormatVersion);
  EXPECT_TRUE(FormatRecord::FromJson(rec.ToJson())->Spec().checksums_in_meta);
  rec.version = 1;
  auto v1 = FormatRecord::FromJson(rec.ToJson());
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->version, 1);
  EXPECT_FALSE(v1->Spec().checksums_in_meta);
  rec.version = kFormatVersion + 1;
  auto newer = FormatRecord::FromJson(rec.ToJson());
  EXPECT_EQ(newer.status().code(), EPROTO);
  EXPECT_NE(newer.status().message().find("newer than this tierfs understands"), std::string::npos);
  // Records written before the field existed are version 1.
  EXPECT_EQ(FormatRecord::FromJson(R"({"name": "old", "storage": "s3"})")->version, 1);
}

// A mirror with a store of its own names the primary's store as its source: kept through
// JSON, its secrets hidden like the volume's own.
TEST(FormatRecord, AMirrorsSourceStore) {
  FormatRecord rec;
  rec.name = "m";
  rec.storage = "file";
  rec.bucket = "/mirror";
  EXPECT_EQ(rec.ToJson().find("source"), std::string::npos);
  rec.source_storage = "s3";
  rec.source_bucket = "http://primary/b";
  rec.source_access_key = "AK";
  rec.source_secret_key = "SK";
  auto back = FormatRecord::FromJson(rec.ToJson());
  ASSERT_TRUE(back.ok());
  StorageSpec src = back->SourceSpec();
  EXPECT_EQ(src.storage, "s3");
  EXPECT_EQ(src.bucket, "http://primary/b");
  EXPECT_EQ(src.access_key, "AK");
  EXPECT_EQ(src.secret_key, "SK");
  EXPECT_EQ(src.volume, "m");
  EXPECT_EQ(back->Spec().bucket, "/mirror");
  EXPECT_EQ(back->Redacted().source_secret_key, "****");
  EXPECT_EQ(back->Redacted().ToJson().find("SK"), std::string::npos);
}

TYPED_TEST(MetaTest, FormatRefusesToOverwriteUnlessForced) {
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  FormatRecord rec;
  rec.name = "again";
  Status st = Meta::Format(engine->get(), rec, false);
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_NE(st.message().find("--force"), std::string::npos);
  this->File("keep");
  // The refused format lost nothing.
  EXPECT_TRUE(this->m_->Lookup(this->root_, kRootIno, "keep").ok());
  EXPECT_TRUE(Meta::Format(engine->get(), rec, true).ok());
  auto m = Meta::Open(std::move(*engine));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->format().name, "again");
  EXPECT_EQ((*m)->Lookup(this->root_, kRootIno, "keep").status().code(), ENOENT);
}

TYPED_TEST(MetaTest, OpenUnformattedFails) {
  auto engine = OpenKvEngine(TypeParam::Url());
  ASSERT_TRUE(engine.ok());
  auto m = Meta::Open(std::move(*engine));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ENOENT);
  EXPECT_NE(m.status().message().find("no TierFS volume"), std::string::npos);
}

TYPED_TEST(MetaTest, CreateLookupAndErrors) {
  Ino f = this->File("a");
  auto r = this->m_->Lookup(this->root_, kRootIno, "a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, f);
  EXPECT_TRUE(S_ISREG(r->second.mode));
  EXPECT_EQ(r->second.mode & 07777, 0644u);
  EXPECT_EQ(this->Err(this->m_->Mknod(this->root_, kRootIno, "a", S_IFREG | 0644, 0)), EEXIST);
  EXPECT_EQ(this->Err(this->m_->Lookup(this->root_, kRootIno, "missing")), ENOENT);
  EXPECT_EQ(this->Err(this->m_->Lookup(this->root_, f, "x")), ENOTDIR);
  EXPECT_EQ(this->Err(this->m_->Mknod(this->root_, kRootIno, std::string(256, 'n'), S_IFREG, 0)), ENAMETOOLONG);
  EXPECT_TRUE(this->m_->Mknod(this->root_, kRootIno, std::string(255, 'n'), S_IFREG, 0).ok());
}

TYPED_TEST(MetaTest, SpecialFiles) {
  auto fifo = this->m_->Mknod(this->root_, kRootIno, "fifo", S_IFIFO | 0600, 0);
  ASSERT_TRUE(fifo.ok());
  EXPECT_TRUE(S_ISFIFO(fifo->second.mode));
  auto dev = this->m_->Mknod(this->root_, kRootIno, "dev", S_IFCHR | 0600, makedev(1, 3));
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(dev->second.rdev, makedev(1, 3));
  Ctx user;
  user.uid = 1000;
  user.gid = 1000;
  EXPECT_EQ(this->Err(this->m_->Mknod(user, kRootIno, "dev2", S_IFBLK | 0600, 1)), EPERM);
}

TYPED_TEST(MetaTest, DirectoriesAndLinkCounts) {
  Ino d = this->Dir("d");
  auto root = this->m_->GetAttr(kRootIno);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->nlink, 3u);
  Ino sub = this->Dir("sub", d);
  EXPECT_EQ(this->m_->GetAttr(d)->nlink, 3u);
  EXPECT_EQ(this->m_->GetAttr(sub)->nlink, 2u);
  Ino f = this->File("f", d);
  EXPECT_EQ(this->Err(this->m_->Rmdir(this->root_, kRootIno, "d")), ENOTEMPTY);
  EXPECT_EQ(this->Err(this->m_->Unlink(this->root_, kRootIno, "d")), EISDIR);
  EXPECT_EQ(this->Err(this->m_->Rmdir(this->root_, d, "f")), ENOTDIR);
  // hard links
  auto l = this->m_->Link(this->root_, f, kRootIno, "f2");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->nlink, 2u);
  EXPECT_EQ(this->Err(this->m_->Link(this->root_, d, kRootIno, "dlink")), EPERM);
  ASSERT_TRUE(this->m_->Unlink(this->root_, d, "f").ok());
  EXPECT_EQ(this->m_->GetAttr(f)->nlink, 1u);
  ASSERT_TRUE(this->m_->Rmdir(this->root_, d, "sub").ok());
  EXPECT_EQ(this->m_->GetAttr(d)->nlink, 2u);
  ASSERT_TRUE(this->m_->Rmdir(this->root_, kRootIno, "d").ok());
  EXPECT_EQ(this->m_->GetAttr(kRootIno)->nlink, 2u);
  EXPECT_EQ(this->Err(this->m_->GetAttr(d)), ENOENT);
}

TYPED_TEST(MetaTest, ReaddirListsEveryEntryOnce) {
  Ino d = this->Dir("d");
  for (int i = 0; i < 300; ++i) this->File("f" + std::to_string(i), d);
  auto r = this->m_->Readdir(this->root_, d, true);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 300u);
  std::set<std::string> names;
  for (auto& e : *r) {
    names.insert(e.name);
    EXPECT_TRUE(S_ISREG(e.attr.mode));
    EXPECT_EQ(e.type, static_cast<uint32_t>(S_IFREG));
  }
  EXPECT_EQ(names.size(), 300u);
}

TYPED_TEST(MetaTest, LookupManyFindsWhatLookupFinds) {
  Ino d = this->Dir("d");
  Ino e = this->Dir("e");
  Ino f = this->File("f", d);
  // More items than one transaction takes, over three directories (one of them a file).
  std::vector<Meta::NameLookup> items;
  for (size_t i = 0; i < Meta::kLookupBatch + 10; ++i) {
    if (i % 3 == 0) this->File("g" + std::to_string(i), e);
    items.push_back({e, "g" + std::to_string(i)});
  }
  items.push_back({d, "f"});
  items.push_back({d, "missing"});
  items.push_back({f, "under-a-file"});
  items.push_back({999999, "in-no-directory"});
  ASSERT_TRUE(this->m_->LookupMany(this->root_, items.data(), items.size()).ok());
  for (const auto& it : items) {
    auto one = this->m_->Lookup(this->root_, it.parent, it.name);
    if (one.ok()) {
      EXPECT_EQ(it.ino, one->first) << it.name;
      EXPECT_EQ(it.attr.mode, one->second.mode) << it.name;
      EXPECT_EQ(it.attr.mtime_ns, one->second.mtime_ns) << it.name;
    } else {
      EXPECT_EQ(it.ino, 0u) << it.name << ": " << one.status().message();
    }
  }
  EXPECT_EQ(items[Meta::kLookupBatch + 10].ino, f);
  // Not plain names are refused, not looked up.
  std::vector<Meta::NameLookup> bad = {{d, ".."}};
  EXPECT_EQ(this->m_->LookupMany(this->root_, bad.data(), bad.size()).code(), EINVAL);
  // A user without search permission on the directory gets the error, as Lookup gives it.
  ASSERT_TRUE(this->m_->SetAttr(this->root_, d, kSetMode, [] { Attr a; a.mode = 0700; return a; }()).ok());
  Ctx user;
  user.uid = 1000;
  user.gid = 1000;
  std::vector<Meta::NameLookup> theirs = {{d, "f"}};
  EXPECT_EQ(this->m_->LookupMany(user, theirs.data(), theirs.size()).code(), EACCES);
}

TYPED_TEST(MetaTest, RenameRules) {
  Ino a = this->Dir("a");
  Ino b = this->Dir("b", a);
  Ino f = this->File("f");
  Ino g = this->File("g");
  // into own subtree
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, kRootIno, "a", b, "x", 0)), EINVAL);
  // noreplace
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, kRootIno, "f", kRootIno, "g", kRenameNoReplace)), EEXIST);
  // replace a file: g's inode is gone
  ASSERT_TRUE(this->m_->Rename(this->root_, kRootIno, "f", kRootIno, "g", 0).ok());
  EXPECT_EQ(this->m_->Lookup(this->root_, kRootIno, "g")->first, f);
  EXPECT_EQ(this->Err(this->m_->GetAttr(g)), ENOENT);
  // file over dir and dir over file
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, kRootIno, "g", kRootIno, "a", 0)), EISDIR);
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, a, "b", kRootIno, "g", 0)), ENOTDIR);
  // dir over empty dir, and over non-empty dir
  Ino e = this->Dir("e");
  this->File("inside", e);
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, a, "b", kRootIno, "e", 0)), ENOTEMPTY);
  ASSERT_TRUE(this->m_->Unlink(this->root_, e, "inside").ok());
  ASSERT_TRUE(this->m_->Rename(this->root_, a, "b", kRootIno, "e", 0).ok());
  EXPECT_EQ(this->m_->GetAttr(b)->parent, kRootIno);
  EXPECT_EQ(this->m_->GetAttr(a)->nlink, 2u);
  EXPECT_EQ(this->m_->GetAttr(kRootIno)->nlink, 4u);  // ., .., a, e(=b)
  EXPECT_EQ(this->Err(this->m_->GetAttr(e)), ENOENT);
  // exchange a file and a directory across directories
  ASSERT_TRUE(this->m_->Rename(this->root_, kRootIno, "g", a, "moved", 0).ok());
  ASSERT_TRUE(this->m_->Rename(this->root_, a, "moved", kRootIno, "e", kRenameExchange).ok());
  EXPECT_EQ(this->m_->Lookup(this->root_, kRootIno, "e")->first, f);
  EXPECT_EQ(this->m_->Lookup(this->root_, a, "moved")->first, b);
  EXPECT_EQ(this->m_->GetAttr(b)->parent, a);
  EXPECT_EQ(this->m_->GetAttr(a)->nlink, 3u);
  EXPECT_EQ(this->m_->GetAttr(kRootIno)->nlink, 3u);
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, kRootIno, "e", kRootIno, "nope", kRenameExchange)), ENOENT);
  // rename onto a hard link of itself is a no-op
  ASSERT_TRUE(this->m_->Link(this->root_, f, kRootIno, "f-link").ok());
  ASSERT_TRUE(this->m_->Rename(this->root_, kRootIno, "e", kRootIno, "f-link", 0).ok());
  EXPECT_TRUE(this->m_->Lookup(this->root_, kRootIno, "e").ok());
  EXPECT_EQ(this->m_->GetAttr(f)->nlink, 2u);
  // RENAME_WHITEOUT leaves a 0:0 character device at the source (overlayfs upper layers).
  ASSERT_TRUE(this->m_->Rename(this->root_, kRootIno, "e", a, "w", kRenameWhiteout).ok());
  EXPECT_EQ(this->m_->Lookup(this->root_, a, "w")->first, f);
  auto wh = this->m_->Lookup(this->root_, kRootIno, "e");
  ASSERT_TRUE(wh.ok());
  EXPECT_EQ(wh->second.mode, static_cast<uint32_t>(S_IFCHR));
  EXPECT_EQ(wh->second.rdev, 0u);
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, a, "w", kRootIno, "e", kRenameWhiteout | kRenameExchange)),
            EINVAL);
  Ctx user;
  user.uid = user.gid = 1000;
  EXPECT_EQ(this->Err(this->m_->Rename(user, a, "w", kRootIno, "x", kRenameWhiteout)), EPERM);
}

TYPED_TEST(MetaTest, SymlinksAndXattrs) {
  auto s = this->m_->Symlink(this->root_, kRootIno, "s", "target/path");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->second.length, 11u);
  EXPECT_EQ(*this->m_->Readlink(s->first), "target/path");
  Ino f = this->File("f");
  EXPECT_EQ(this->Err(this->m_->Readlink(f)), EINVAL);
  EXPECT_EQ(this->Err(this->m_->GetXattr(this->root_, f, "user.a")), ENODATA);
  EXPECT_EQ(this->Err(this->m_->SetXattr(this->root_, f, "user.a", "1", XATTR_REPLACE)), ENODATA);
  ASSERT_TRUE(this->m_->SetXattr(this->root_, f, "user.a", "1", XATTR_CREATE).ok());
  EXPECT_EQ(this->Err(this->m_->SetXattr(this->root_, f, "user.a", "2", XATTR_CREATE)), EEXIST);
  ASSERT_TRUE(this->m_->SetXattr(this->root_, f, "user.a", "2", XATTR_REPLACE).ok());
  ASSERT_TRUE(this->m_->SetXattr(this->root_, f, "trusted.t", "x", 0).ok());
  EXPECT_EQ(*this->m_->GetXattr(this->root_, f, "user.a"), "2");
  auto names = this->m_->ListXattr(this->root_, f);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 2u);
  Ctx user;
  user.uid = 1000;
  user.gid = 1000;
  EXPECT_EQ(this->m_->ListXattr(user, f)->size(), 1u);  // trusted.* hidden from users
  EXPECT_EQ(this->Err(this->m_->SetXattr(this->root_, f, "user.big", std::string(65537, 'x'), 0)), E2BIG);
  ASSERT_TRUE(this->m_->RemoveXattr(this->root_, f, "user.a").ok());
  EXPECT_EQ(this->Err(this->m_->RemoveXattr(this->root_, f, "user.a")), ENODATA);
}

TYPED_TEST(MetaTest, PermissionsStickyAndSetgid) {
  Ctx alice;
  alice.uid = 1000;
  alice.gid = 1000;
  Ctx bob;
  bob.uid = 1001;
  bob.gid = 1001;
  Ino d = this->Dir("d", kRootIno, 0755);
  EXPECT_EQ(this->Err(this->m_->Mknod(alice, d, "x", S_IFREG | 0644, 0)), EACCES);
  Attr mode;
  mode.mode = 01777;
  ASSERT_TRUE(this->m_->SetAttr(this->root_, d, kSetMode, mode).ok());
  auto af = this->m_->Mknod(alice, d, "alice", S_IFREG | 0644, 0);
  ASSERT_TRUE(af.ok());
  EXPECT_EQ(af->second.uid, 1000u);
  EXPECT_EQ(af->second.gid, 1000u);
  // sticky: bob can't remove or rename alice's file; alice can
  EXPECT_EQ(this->Err(this->m_->Unlink(bob, d, "alice")), EPERM);
  EXPECT_EQ(this->Err(this->m_->Rename(bob, d, "alice", d, "b", 0)), EPERM);
  // chmod only by owner, chown only by root
  mode.mode = 0600;
  EXPECT_EQ(this->Err(this->m_->SetAttr(bob, af->first, kSetMode, mode)), EPERM);
  EXPECT_TRUE(this->m_->SetAttr(alice, af->first, kSetMode, mode).ok());
  Attr own;
  own.uid = 1001;
  EXPECT_EQ(this->Err(this->m_->SetAttr(alice, af->first, kSetUid, own)), EPERM);
  EXPECT_TRUE(this->m_->SetAttr(this->root_, af->first, kSetUid, own).ok());
  ASSERT_TRUE(this->m_->Unlink(bob, d, "alice").ok());  // now bob owns it
  // 0600 file of root: alice can't open it for reading
  Ino secret = this->File("secret", kRootIno, 0600);
  EXPECT_EQ(this->Err(this->m_->Open(alice, secret, O_RDONLY)), EACCES);
  EXPECT_TRUE(this->m_->Open(this->root_, secret, O_RDWR).ok());
  // search permission on the path
  Ino closed = this->Dir("closed", kRootIno, 0700);
  this->File("in", closed);
  EXPECT_EQ(this->Err(this->m_->Lookup(alice, closed, "in")), EACCES);
  // setgid directory: group inherited, subdirectories inherit the bit
  Ino sg = this->Dir("sg", kRootIno, 0777);
  Attr sgattr;
  sgattr.mode = 02777;
  sgattr.gid = 4242;
  ASSERT_TRUE(this->m_->SetAttr(this->root_, sg, kSetMode | kSetGid, sgattr).ok());
  auto inherited = this->m_->Mknod(alice, sg, "file", S_IFREG | 0644, 0);
  ASSERT_TRUE(inherited.ok());
  EXPECT_EQ(inherited->second.gid, 4242u);
  auto subdir = this->m_->Mkdir(alice, sg, "sub", 0755);
  ASSERT_TRUE(subdir.ok());
  EXPECT_EQ(subdir->second.gid, 4242u);
  EXPECT_TRUE(subdir->second.mode & S_ISGID);
}

TYPED_TEST(MetaTest, TruncateMasksAndCleanup) {
  Ino f = this->File("f");
  uint64_t id1;
  this->WriteSlice(f, 0, 0, 1000, &id1);
  this->WriteSlice(f, 1, 0, 1000);  // second chunk
  EXPECT_EQ(this->m_->GetAttr(f)->length, kChunkSize + 1000);
  Attr in;
  in.length = 500;
  ASSERT_TRUE(this->m_->SetAttr(this->root_, f, kSetSize, in).ok());
  EXPECT_EQ(this->m_->GetAttr(f)->length, 500u);
  // extend again: [500, 1000) of chunk 0 and all of chunk 1 read as zeros
  in.length = kChunkSize + 2000;
  ASSERT_TRUE(this->m_->SetAttr(this->root_, f, kSetSize, in).ok());
  auto c0 = Resolve(*this->m_->ReadChunk(f, 0), 1000);
  EXPECT_EQ(c0[499].first, id1);
  EXPECT_EQ(c0[500].first, 0u);
  auto c1 = Resolve(*this->m_->ReadChunk(f, 1), 1000);
  EXPECT_EQ(c1[0].first, 0u);
  // cleanup applies the mask to the records and frees the cut slice
  std::vector<uint64_t> deleted;
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  auto after0 = *this->m_->ReadChunk(f, 0);
  ASSERT_EQ(after0.size(), 1u);
  EXPECT_EQ(after0[0].len, 500u);
  EXPECT_TRUE(this->m_->ReadChunk(f, 1)->empty());
  // a write after the truncate is not masked
  this->WriteSlice(f, 1, 10, 10);
  auto c1b = Resolve(*this->m_->ReadChunk(f, 1), 30);
  EXPECT_NE(c1b[10].first, 0u);
  EXPECT_EQ(c1b[9].first, 0u);
}

TYPED_TEST(MetaTest, UnlinkFreesSlicesInTheBackground) {
  Ino f = this->File("f");
  uint64_t id;
  this->WriteSlice(f, 0, 0, 4096, &id);
  std::vector<uint64_t> deleted;
  this->m_->StartBackground([&](uint64_t sid, uint32_t) {
    deleted.push_back(sid);
    return Status::OK();
  });
  this->m_->StopBackground();
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_EQ(deleted[0], id);
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_EQ(deleted.size(), 1u);  // pending record gone after success
}

TYPED_TEST(MetaTest, OpenUnlinkedFileLivesUntilRelease) {
  Ino f = this->File("f");
  this->WriteSlice(f, 0, 0, 100);
  ASSERT_TRUE(this->m_->Open(this->root_, f, O_RDWR).ok());
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  auto a = this->m_->GetAttr(f);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nlink, 0u);
  EXPECT_EQ(this->m_->ReadChunk(f, 0)->size(), 1u);
  ASSERT_TRUE(this->m_->Release(f).ok());
  EXPECT_EQ(this->Err(this->m_->GetAttr(f)), ENOENT);
}

TYPED_TEST(MetaTest, CopyFileRangeSharesSlices) {
  Ino src = this->File("src");
  Ino dst = this->File("dst");
  uint64_t id;
  this->WriteSlice(src, 0, 0, 8192, &id);
  auto n = this->m_->CopyFileRange(this->root_, src, 1000, dst, 50, 3000);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3000u);
  EXPECT_EQ(this->m_->GetAttr(dst)->length, 3050u);
  auto r = Resolve(*this->m_->ReadChunk(dst, 0), 3050);
  EXPECT_EQ(r[49].first, 0u);
  EXPECT_EQ(r[50], std::make_pair(id, 1000u));
  EXPECT_EQ(r[3049], std::make_pair(id, 3999u));
  // the slice survives deleting the source, and is freed with the copy
  std::vector<uint64_t> deleted;
  this->m_->StartBackground([&](uint64_t sid, uint32_t) {
    deleted.push_back(sid);
    return Status::OK();
  });
  this->m_->StopBackground();
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "src").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_TRUE(deleted.empty());
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "dst").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_EQ(deleted.size(), 1u);
}

// A copy takes what is visible in the source range, not the records shadowed there: copies
// of copies of an often rewritten range must not grow the metadata (fsx found a chunk
// with half a million records after 2,500 operations).
TYPED_TEST(MetaTest, CopyFileRangeCopiesOnlyWhatIsVisible) {
  Ino f = this->File("f");
  uint64_t last = 0;
  for (int i = 0; i < 40; ++i) this->WriteSlice(f, 0, 0, 4096, &last);  // each shadows the one before
  size_t before = this->m_->ReadChunk(f, 0)->size();
  for (int round = 0; round < 6; ++round) {
    uint64_t from = (round % 2) ? 8192 : 0, to = (round % 2) ? 0 : 8192;
    auto n = this->m_->CopyFileRange(this->root_, f, from, f, to, 4096);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, 4096u);
  }
  auto recs = *this->m_->ReadChunk(f, 0);
  // Each copy adds a hole and one record for the one visible piece.
  EXPECT_LE(recs.size(), before + 6 * 2);
  auto r = Resolve(recs, 12288);
  EXPECT_EQ(r[0], std::make_pair(last, 0u));
  EXPECT_EQ(r[8192 + 4095], std::make_pair(last, 4095u));
  EXPECT_EQ(r[4096].first, 0u);
}

TYPED_TEST(MetaTest, FallocatePunchHoleAndExtend) {
  Ino f = this->File("f");
  uint64_t id;
  this->WriteSlice(f, 0, 0, 1000, &id);
  ASSERT_TRUE(this->m_->Fallocate(this->root_, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 200).ok());
  auto r = Resolve(*this->m_->ReadChunk(f, 0), 1000);
  EXPECT_EQ(r[99].first, id);
  EXPECT_EQ(r[100].first, 0u);
  EXPECT_EQ(r[299].first, 0u);
  EXPECT_EQ(r[300].first, id);
  EXPECT_EQ(this->m_->GetAttr(f)->length, 1000u);
  ASSERT_TRUE(this->m_->Fallocate(this->root_, f, 0, 0, 5000).ok());
  EXPECT_EQ(this->m_->GetAttr(f)->length, 5000u);
  EXPECT_EQ(this->Err(this->m_->Fallocate(this->root_, f, FALLOC_FL_PUNCH_HOLE, 0, 10)), EOPNOTSUPP);
}

TYPED_TEST(MetaTest, LocksConflictAcrossClients) {
  auto other = this->Open(false);  // a second client of the same volume
  Ino f = this->File("f");
  ASSERT_TRUE(this->m_->Flock(f, 1, F_WRLCK).ok());
  EXPECT_EQ(other->Flock(f, 1, F_RDLCK).code(), EAGAIN);
  ASSERT_TRUE(this->m_->Flock(f, 1, F_UNLCK).ok());
  ASSERT_TRUE(other->Flock(f, 1, F_RDLCK).ok());
  EXPECT_TRUE(this->m_->Flock(f, 2, F_RDLCK).ok());   // shared
  EXPECT_EQ(this->m_->Flock(f, 3, F_WRLCK).code(), EAGAIN);
  // record locks
  Meta::LockRange w{F_WRLCK, 0, 99, 1};
  ASSERT_TRUE(this->m_->SetLk(f, 7, w).ok());
  Meta::LockRange want{F_RDLCK, 50, 60, 2};
  EXPECT_EQ(other->SetLk(f, 7, want).code(), EAGAIN);
  auto held = other->GetLk(f, 7, want);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->type, F_WRLCK);
  EXPECT_EQ(held->start, 0u);
  EXPECT_EQ(held->end, 99u);
  Meta::LockRange beyond{F_WRLCK, 100, UINT64_MAX, 2};
  EXPECT_TRUE(other->SetLk(f, 7, beyond).ok());
  // unlock the middle: the hole becomes lockable
  Meta::LockRange un{F_UNLCK, 40, 69, 1};
  ASSERT_TRUE(this->m_->SetLk(f, 7, un).ok());
  EXPECT_TRUE(other->SetLk(f, 8, want).ok());
  EXPECT_EQ(other->GetLk(f, 9, Meta::LockRange{F_WRLCK, 0, 10, 3})->type, F_WRLCK);
  ASSERT_TRUE(this->m_->ReleaseRecordLocks(f, 7).ok());
  EXPECT_EQ(other->GetLk(f, 9, Meta::LockRange{F_WRLCK, 0, 10, 3})->type, F_UNLCK);
}

// A client knows that a file it just created has no xattrs and answers security.* reads
// without the engine; its own setxattr ends that at once, another client's within the
// attribute cache window.
TYPED_TEST(MetaTest, FreshFileXattrKnowledge) {
  MetaOptions cached;
  cached.dir_attr_cache_ns = 200'000'000;
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  auto opened = Meta::Open(std::move(*engine), cached);
  ASSERT_TRUE(opened.ok());
  Meta& a = **opened;
  SessionInfo info;
  ASSERT_TRUE(a.NewSession(info).ok());
  auto f = a.Mknod(this->root_, kRootIno, "fresh", S_IFREG | 0644, 0);
  ASSERT_TRUE(f.ok());
  Ino ino = f->first;
  EXPECT_EQ(this->Err(a.GetXattr(this->root_, ino, "security.capability").status()), ENODATA);
  ASSERT_TRUE(a.SetXattr(this->root_, ino, "security.capability", "own", 0).ok());
  auto own = a.GetXattr(this->root_, ino, "security.capability");
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(*own, "own");

  auto g = a.Mknod(this->root_, kRootIno, "fresh2", S_IFREG | 0644, 0);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(this->m_->SetXattr(this->root_, g->first, "security.selinux", "other", 0).ok());
  auto seen = [&] { return a.GetXattr(this->root_, g->first, "security.selinux").ok(); };
  for (int i = 0; i < 100 && !seen(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(seen()) << "another client's xattr must be visible once the cache window passed";
  // Other namespaces always ask the engine.
  ASSERT_TRUE(this->m_->SetXattr(this->root_, g->first, "user.u", "v", 0).ok());
  EXPECT_TRUE(a.GetXattr(this->root_, g->first, "user.u").ok());
}

TYPED_TEST(MetaTest, DeadSessionIsCleaned) {
  MetaOptions fast;
  fast.session_timeout_ns = 1;  // every other session looks dead at once
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  auto cleaner = Meta::Open(std::move(*engine), fast);
  ASSERT_TRUE(cleaner.ok());
  SessionInfo info;
  ASSERT_TRUE((*cleaner)->NewSession(info).ok());
  Ino f = this->File("f");
  this->WriteSlice(f, 0, 0, 10);
  ASSERT_TRUE(this->m_->Flock(f, 1, F_WRLCK).ok());
  ASSERT_TRUE(this->m_->Open(this->root_, f, O_RDONLY).ok());
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  EXPECT_EQ((*cleaner)->ListSessions()->size(), 2u);
  // "kill" the first client: it never closes; the cleaner reclaims its lock and file
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE((*cleaner)->RunCleanupOnce().ok());
  EXPECT_EQ((*cleaner)->ListSessions()->size(), 1u);
  EXPECT_EQ((*cleaner)->GetAttr(f).status().code(), ENOENT);
  EXPECT_TRUE((*cleaner)->Flock(f, 1, F_WRLCK).ok());
}

TYPED_TEST(MetaTest, NoSessionStartsOnAVolumeBeingDestroyed) {
  ASSERT_TRUE(this->m_->MarkDestroying(true).ok());
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  auto other = Meta::Open(std::move(*engine));
  ASSERT_TRUE(other.ok());
  Status st = (*other)->NewSession(SessionInfo{});
  EXPECT_EQ(st.code(), EBUSY) << st.ToString();
  EXPECT_NE(st.message().find("being destroyed"), std::string::npos) << st.ToString();
  EXPECT_EQ((*other)->ListSessions()->size(), 1u);  // this client's own, from before the mark
  ASSERT_TRUE(this->m_->MarkDestroying(false).ok());
  EXPECT_TRUE((*other)->NewSession(SessionInfo{}).ok());
}

// Usage is counted by the transactions that change it: a client killed right after its
// writes loses none of it, and folding a dead session's counts keeps the total.
TYPED_TEST(MetaTest, UsageSurvivesAKilledClient) {
  Ino f = this->File("f");
  this->WriteSlice(f, 0, 0, 10000);
  this->Dir("d");
  this->m_.reset();  // killed: no CloseSession, nothing flushed
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  MetaOptions o;
  o.session_timeout_ns = 1;  // every other session counts as dead at once
  auto m = Meta::Open(std::move(*engine), o);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->NewSession(SessionInfo{}).ok());
  auto s = (*m)->GetStatFs();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->used_bytes, 12288u);
  EXPECT_EQ(s->inodes, 3u);
  ASSERT_TRUE((*m)->RunCleanupOnce().ok());  // the dead session's counts are folded in
  s = (*m)->GetStatFs();
  EXPECT_EQ(s->used_bytes, 12288u);
  EXPECT_EQ(s->inodes, 3u);
  // fsck's repair sets the counters to what it found.
  ASSERT_TRUE((*m)->RepairUsage(4096, 7).ok());
  EXPECT_EQ((*m)->GetStatFs()->used_bytes, 4096u);
  EXPECT_EQ((*m)->GetStatFs()->inodes, 7u);
}

// A client that deletes what another (live) client created folds a negative share into the
// volume's counters at its end: the total stays exact, never clamped at zero on the way.
TYPED_TEST(MetaTest, UsageStaysExactWhenOneClientDeletesWhatAnotherCreated) {
  for (int i = 0; i < 5; ++i) this->WriteSlice(this->File("f" + std::to_string(i)), 0, 0, 10000);
  auto before = this->m_->GetStatFs();
  ASSERT_TRUE(before.ok());
  {
    auto engine = OpenKvEngine(this->url_);
    ASSERT_TRUE(engine.ok());
    auto other = Meta::Open(std::move(*engine));
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->NewSession(SessionInfo{}).ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*other)->Unlink(this->root_, kRootIno, "f" + std::to_string(i)).ok());
    ASSERT_TRUE((*other)->RunCleanupOnce().ok());
    ASSERT_TRUE((*other)->CloseSession().ok());  // folds -5 files into the volume's counters
  }
  auto after = this->m_->GetStatFs();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->inodes, before->inodes - 5);
  EXPECT_EQ(after->used_bytes, before->used_bytes - 5 * 12288);
}

TYPED_TEST(MetaTest, UsageCounters) {
  Ino f = this->File("f");
  this->WriteSlice(f, 0, 0, 10000);
  auto s = this->m_->GetStatFs();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->used_bytes, 12288u);
  EXPECT_EQ(s->inodes, 2u);
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  s = this->m_->GetStatFs();
  EXPECT_EQ(s->used_bytes, 0u);
  EXPECT_EQ(s->inodes, 1u);
}

TYPED_TEST(MetaTest, IdsAreUniqueAcrossClients) {
  auto other = this->Open(false);
  std::set<uint64_t> ids;
  for (int i = 0; i < 3000; ++i) {
    ids.insert(*this->m_->NewSliceId());
    ids.insert(*other->NewSliceId());
  }
  EXPECT_EQ(ids.size(), 6000u);
}

TYPED_TEST(MetaTest, ConcurrentCreatesInOneDirectory) {
  Ino d = this->Dir("d");
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if (!this->m_->Mknod(this->root_, d, "t" + std::to_string(t) + "_" + std::to_string(i), S_IFREG | 0644, 0)
                 .ok()) {
          failures++;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(this->m_->Readdir(this->root_, d, false)->size(), 400u);
}

TEST(Atime, RelatimeStrictatimeAndNoatimeRules) {
  const int64_t day = 24ll * 3600 * 1000000000, t = 100 * day;
  // relatime: after a change (atime not after mtime or ctime), or a day on.
  EXPECT_TRUE(AtimeDue(AtimeMode::kRelatime, t, t, t, t + 1));
  EXPECT_TRUE(AtimeDue(AtimeMode::kRelatime, t, t - 5, t + 3, t + 4));
  EXPECT_FALSE(AtimeDue(AtimeMode::kRelatime, t, t - 5, t - 5, t + day - 1));
  EXPECT_TRUE(AtimeDue(AtimeMode::kRelatime, t, t - 5, t - 5, t + day));
  EXPECT_FALSE(AtimeDue(AtimeMode::kRelatime, t, t + 9, t + 9, t));  // never backwards
  EXPECT_TRUE(AtimeDue(AtimeMode::kStrict, t, t - 5, t - 5, t + 1));
  EXPECT_FALSE(AtimeDue(AtimeMode::kStrict, t, t - 5, t - 5, t));
  EXPECT_FALSE(AtimeDue(AtimeMode::kNone, t, t + 9, t + 9, t + day));
}

TYPED_TEST(MetaTest, TouchAtimesJudgesAgainOnWhatTheEngineHolds) {
  Ino f = this->File("f");
  Ino g = this->File("g");
  auto a = this->m_->GetAttr(f);
  ASSERT_TRUE(a.ok());
  const int64_t read = a->mtime_ns + 1000;
  // g's atime was set (utimensat) after the read: the read does not move it back.
  Attr in;
  in.atime_ns = read + 5000;
  ASSERT_TRUE(this->m_->SetAttr(this->root_, g, kSetAtime, in).ok());
  auto g_before = this->m_->GetAttr(g);
  ASSERT_TRUE(this->m_->TouchAtimes({{f, read}, {g, read}, {999999, read}}, AtimeMode::kRelatime).ok());
  auto fa = this->m_->GetAttr(f);
  EXPECT_EQ(fa->atime_ns, read);
  EXPECT_EQ(fa->ctime_ns, a->ctime_ns) << "reading changes no attribute";
  EXPECT_EQ(this->m_->GetAttr(g)->atime_ns, read + 5000);
  EXPECT_EQ(this->m_->GetAttr(g)->ctime_ns, g_before->ctime_ns);
  // Under relatime a second read soon after leaves it; strictatime moves it on.
  ASSERT_TRUE(this->m_->TouchAtimes({{f, read + 10}}, AtimeMode::kRelatime).ok());
  EXPECT_EQ(this->m_->GetAttr(f)->atime_ns, read);
  ASSERT_TRUE(this->m_->TouchAtimes({{f, read + 10}}, AtimeMode::kStrict).ok());
  EXPECT_EQ(this->m_->GetAttr(f)->atime_ns, read + 10);
}

}  // namespace
}  // namespace tierfs
