// POSIX ACL semantics of Meta on every engine (part of the typed suite in meta_test).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <initializer_list>
#include <chrono>
#include <sstream>
#include <thread>

#include "meta/acl.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines
using namespace acl;           // NOLINT: tags

const std::string kAccess(kAccessXattr);
const std::string kDefault(kDefaultXattr);

std::string Blob(std::initializer_list<Entry> entries) {
  Acl a;
  a.entries = entries;
  return a.Encode();
}

// u::rw-, u:1000:rw-, g::r--, m::rw-, o::r--
std::string GrantAlice() { return Blob({{kUserObj, 6}, {kUser, 6, 1000}, {kGroupObj, 4}, {kMask, 6}, {kOther, 4}}); }

Ctx Who(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups = {}, uint32_t umask = 0) {
  Ctx c;
  c.uid = uid;
  c.gid = gid;
  c.umask = umask;
  c.load_groups = [groups] { return groups; };
  return c;
}

bool Lists(Meta& m, Ino ino, const std::string& name) {
  auto names = m.ListXattr(Ctx::Root(), ino);
  return names.ok() && std::find(names->begin(), names->end(), name) != names->end();
}

// Counts the reads (Get, GetIndirect, Scan) that reach an engine: each is one round trip
// on a server engine.
class CountingEngine : public KvEngine {
 public:
  explicit CountingEngine(std::unique_ptr<KvEngine> inner) : inner_(std::move(inner)) {}
  std::string Describe() const override { return inner_->Describe(); }
  Status Reset() override { return inner_->Reset(); }
  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    return inner_->Txn([&](KvTxn& t) {
      Counting c(t, &reads);
      return fn(c);
    }, read_only);
  }
  std::atomic<int> reads{0};

 private:
  struct Counting : KvTxn {
    Counting(KvTxn& t, std::atomic<int>* n) : t_(t), n_(n) {}
    Result<std::optional<std::string>> Get(std::string_view key) override {
      ++*n_;
      return t_.Get(key);
    }
    Status Put(std::string_view key, std::string_view value) override { return t_.Put(key, value); }
    Status Delete(std::string_view key) override { return t_.Delete(key); }
    Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                                std::string_view prefix, size_t n,
                                                                std::string_view suffix) override {
      ++*n_;
      return t_.GetIndirect(direct, prefix, n, suffix);
    }
    Status Scan(std::string_view b, std::string_view e, size_t limit, const ScanFn& fn) override {
      ++*n_;
      return t_.Scan(b, e, limit, fn);
    }
    KvTxn& t_;
    std::atomic<int>* n_;
  };
  std::unique_ptr<KvEngine> inner_;
};

TYPED_TEST(MetaTest, AccessAclSetGetRemove) {
  Meta& m = *this->m_;
  const Ctx& root = this->root_;
  Ctx alice = Who(1000, 1000), bob = Who(1001, 1001);
  Ino f = this->File("f", kRootIno, 0644);
  EXPECT_EQ(this->Err(m.GetXattr(root, f, kAccess)), ENODATA);
  EXPECT_EQ(this->Err(m.Open(alice, f, O_RDWR)), EACCES);
  EXPECT_EQ(this->Err(m.SetXattr(alice, f, kAccess, GrantAlice(), 0)), EPERM);
  EXPECT_EQ(this->Err(m.SetXattr(root, f, kAccess, std::string("\x02\0\0\0\x01\0", 6), 0)), EINVAL);
  ASSERT_TRUE(m.SetXattr(root, f, kAccess, GrantAlice(), 0).ok());
  Attr a = *m.GetAttr(f);
  EXPECT_EQ(a.mode, S_IFREG | 0664u);  // group bits: the mask
  EXPECT_TRUE(a.flags & kAttrAccessAcl);
  EXPECT_EQ(*m.GetXattr(bob, f, kAccess), GrantAlice());  // anyone may read an ACL
  EXPECT_TRUE(Lists(m, f, kAccess));
  ASSERT_TRUE(m.Open(alice, f, O_RDWR).ok());
  ASSERT_TRUE(m.Release(f).ok());
  EXPECT_TRUE(m.Access(alice, f, R_OK | W_OK).ok());
  EXPECT_EQ(this->Err(m.Open(bob, f, O_WRONLY)), EACCES);
  EXPECT_TRUE(m.Access(bob, f, R_OK).ok());
  // An ACL the mode can say is stored as the mode alone.
  ASSERT_TRUE(m.SetXattr(root, f, kAccess, Blob({{kUserObj, 7}, {kGroupObj, 5}, {kOther, 0}}), 0).ok());
  a = *m.GetAttr(f);
  EXPECT_EQ(a.mode, S_IFREG | 0750u);
  EXPECT_FALSE(a.flags & kAttrAccessAcl);
  EXPECT_EQ(this->Err(m.GetXattr(root, f, kAccess)), ENODATA);
  EXPECT_FALSE(Lists(m, f, kAccess));
  EXPECT_EQ(this->Err(m.Access(alice, f, R_OK)), EACCES);
  // Removing: an absent ACL is no error (and no change); a present one goes, the mode stays.
  int64_t ctime = m.GetAttr(f)->ctime_ns;
  EXPECT_EQ(this->Err(m.RemoveXattr(bob, f, kAccess)), EPERM);
  EXPECT_TRUE(m.RemoveXattr(root, f, kAccess).ok());
  EXPECT_EQ(m.GetAttr(f)->ctime_ns, ctime);
  ASSERT_TRUE(m.SetXattr(root, f, kAccess, GrantAlice(), 0).ok());
  ASSERT_TRUE(m.RemoveXattr(root, f, kAccess).ok());
  a = *m.GetAttr(f);
  EXPECT_EQ(a.mode, S_IFREG | 0664u);
  EXPECT_FALSE(a.flags & kAttrAccessAcl);
  EXPECT_EQ(this->Err(m.Access(alice, f, W_OK)), EACCES);
  // An empty value removes too.
  ASSERT_TRUE(m.SetXattr(root, f, kAccess, GrantAlice(), 0).ok());
  ASSERT_TRUE(m.SetXattr(root, f, kAccess, "", 0).ok());
  EXPECT_EQ(this->Err(m.GetXattr(root, f, kAccess)), ENODATA);
  // As ext4: a default ACL only on directories, no ACLs on symlinks, no other system.*.
  EXPECT_EQ(this->Err(m.SetXattr(root, f, kDefault, GrantAlice(), 0)), EACCES);
  EXPECT_TRUE(m.SetXattr(root, f, kDefault, "", 0).ok());
  EXPECT_TRUE(m.RemoveXattr(root, f, kDefault).ok());
  auto s = m.Symlink(root, kRootIno, "s", "f");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(this->Err(m.SetXattr(root, s->first, kAccess, GrantAlice(), 0)), EOPNOTSUPP);
  EXPECT_EQ(this->Err(m.SetXattr(root, f, "system.other", "x", 0)), EOPNOTSUPP);
}

TYPED_TEST(MetaTest, AclSetgidAndChmod) {
  Meta& m = *this->m_;
  const Ctx& root = this->root_;
  Ctx alice = Who(1000, 1000);
  // Setting an ACL clears set-group-ID when the caller is outside the owning group.
  Ino sg = this->File("sg", kRootIno, 0644);
  Attr own;
  own.uid = 1000;
  own.gid = 4242;
  ASSERT_TRUE(m.SetAttr(root, sg, kSetUid | kSetGid, own).ok());
  Attr mode;
  mode.mode = 02770;
  ASSERT_TRUE(m.SetAttr(root, sg, kSetMode, mode).ok());
  ASSERT_TRUE(m.SetXattr(root, sg, kAccess, GrantAlice(), 0).ok());
  EXPECT_EQ(m.GetAttr(sg)->mode, S_IFREG | 02664u);  // root keeps it
  ASSERT_TRUE(m.SetXattr(alice, sg, kAccess, GrantAlice(), 0).ok());
  EXPECT_EQ(m.GetAttr(sg)->mode, S_IFREG | 0664u);
  // chmod rewrites owner, mask and other; the named entry stays but the mask limits it.
  Ino f = this->File("f", kRootIno, 0644);
  ASSERT_TRUE(m.SetXattr(root, f, kAccess, GrantAlice(), 0).ok());
  mode.mode = 0600;
  ASSERT_TRUE(m.SetAttr(root, f, kSetMode, mode).ok());
  EXPECT_EQ(*m.GetXattr(root, f, kAccess),
            Blob({{kUserObj, 6}, {kUser, 6, 1000}, {kGroupObj, 4}, {kMask, 0}, {kOther, 0}}));
  EXPECT_EQ(this->Err(m.Open(alice, f, O_RDONLY)), EACCES);
  mode.mode = 0640;
  ASSERT_TRUE(m.SetAttr(root, f, kSetMode, mode).ok());
  EXPECT_TRUE(m.Access(alice, f, R_OK).ok());
  EXPECT_EQ(this->Err(m.Access(alice, f, W_OK)), EACCES);
}

TYPED_TEST(MetaTest, DirectoryAclGrantsSearchAndChanges) {
  Meta& m = *this->m_;
  Ctx alice = Who(1000, 1000), bob = Who(1001, 1001), carol = Who(1002, 1002, {2000});
  Ino d = this->Dir("d", kRootIno, 0700);
  this->File("x", d);
  EXPECT_EQ(this->Err(m.Lookup(alice, d, "x")), EACCES);
  EXPECT_EQ(this->Err(m.Mknod(alice, d, "mine", S_IFREG | 0644, 0)), EACCES);
  ASSERT_TRUE(m.SetXattr(this->root_, d,
                         kAccess,
                         Blob({{kUserObj, 7}, {kUser, 7, 1000}, {kGroupObj, 0}, {kGroup, 5, 2000}, {kMask, 7},
                               {kOther, 0}}),
                         0)
                  .ok());
  EXPECT_TRUE(m.Lookup(alice, d, "x").ok());
  EXPECT_TRUE(m.Lookup(alice, d, ".").ok());
  EXPECT_TRUE(m.Readdir(alice, d, false).ok());
  ASSERT_TRUE(m.Mknod(alice, d, "mine", S_IFREG | 0644, 0).ok());
  EXPECT_TRUE(m.Rename(alice, d, "mine", d, "moved", 0).ok());
  EXPECT_TRUE(m.Link(alice, this->File("src"), d, "linked").ok());
  EXPECT_TRUE(m.Unlink(alice, d, "moved").ok());
  EXPECT_TRUE(m.Mkdir(alice, d, "sub", 0755).ok());
  EXPECT_TRUE(m.Rmdir(alice, d, "sub").ok());
  EXPECT_EQ(this->Err(m.Lookup(bob, d, "x")), EACCES);
  EXPECT_EQ(this->Err(m.Readdir(bob, d, false)), EACCES);
  // The named group through a supplementary group: search and read, no changes.
  EXPECT_TRUE(m.Lookup(carol, d, "x").ok());
  EXPECT_TRUE(m.Readdir(carol, d, false).ok());
  EXPECT_EQ(this->Err(m.Mknod(carol, d, "c", S_IFREG | 0644, 0)), EACCES);
  EXPECT_EQ(this->Err(m.Unlink(carol, d, "x")), EACCES);
}

TYPED_TEST(MetaTest, DefaultAclIsInheritedAndReplacesTheUmask) {
  Meta& m = *this->m_;
  Ctx u077 = Who(0, 0, {}, 077);
  // Without a default ACL the umask applies.
  auto plain = m.Mknod(Who(0, 0, {}, 027), kRootIno, "plain", S_IFREG | 0666, 0);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->second.mode, S_IFREG | 0640u);
  EXPECT_EQ(plain->second.flags, 0u);
  Ino d = this->Dir("d", kRootIno, 0755);
  std::string def = Blob({{kUserObj, 7}, {kUser, 7, 1000}, {kGroupObj, 5}, {kMask, 7}, {kOther, 5}});
  ASSERT_TRUE(m.SetXattr(this->root_, d, kDefault, def, 0).ok());
  Attr da = *m.GetAttr(d);
  EXPECT_EQ(da.mode, S_IFDIR | 0755u);
  EXPECT_EQ(da.flags, kAttrDefaultAcl);
  EXPECT_EQ(*m.GetXattr(this->root_, d, kDefault), def);
  EXPECT_EQ(this->Err(m.GetXattr(this->root_, d, kAccess)), ENODATA);

  auto f = m.Mknod(u077, d, "f", S_IFREG | 0666, 0);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->second.mode, S_IFREG | 0664u);
  EXPECT_EQ(f->second.flags, kAttrAccessAcl);
  EXPECT_EQ(*m.GetXattr(this->root_, f->first, kAccess),
            Blob({{kUserObj, 6}, {kUser, 7, 1000}, {kGroupObj, 5}, {kMask, 6}, {kOther, 4}}));
  EXPECT_TRUE(m.Open(Who(1000, 1000), f->first, O_RDWR).ok());
  auto sub = m.Mkdir(u077, d, "sub", 0777);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->second.mode, S_IFDIR | 0775u);
  EXPECT_EQ(sub->second.flags, kAttrAccessAcl | kAttrDefaultAcl);
  EXPECT_EQ(*m.GetXattr(this->root_, sub->first, kDefault), def);
  EXPECT_EQ(*m.GetXattr(this->root_, sub->first, kAccess), def);
  auto deep = m.Mknod(u077, sub->first, "deep", S_IFREG | 0600, 0);
  ASSERT_TRUE(deep.ok());
  EXPECT_EQ(*m.GetXattr(this->root_, deep->first, kAccess),
            Blob({{kUserObj, 6}, {kUser, 7, 1000}, {kGroupObj, 5}, {kMask, 0}, {kOther, 0}}));
  EXPECT_EQ(this->Err(m.Open(Who(1000, 1000), deep->first, O_RDONLY)), EACCES);  // mask ---
  auto fifo = m.Mknod(u077, d, "p", S_IFIFO | 0644, 0);
  ASSERT_TRUE(fifo.ok());
  EXPECT_EQ(fifo->second.flags, kAttrAccessAcl);
  auto link = m.Symlink(u077, d, "l", "f");
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->second.flags, 0u);
  EXPECT_EQ(link->second.mode, S_IFLNK | 0777u);

  // A default ACL a mode can say: no access ACL, the umask still ignored.
  Ino d2 = this->Dir("d2", kRootIno, 0755);
  ASSERT_TRUE(m.SetXattr(this->root_, d2, kDefault, Blob({{kUserObj, 7}, {kGroupObj, 7}, {kOther, 7}}), 0).ok());
  auto g = m.Mknod(u077, d2, "g", S_IFREG | 0666, 0);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->second.mode, S_IFREG | 0666u);
  EXPECT_EQ(g->second.flags, 0u);
  // Without it the umask is back.
  ASSERT_TRUE(m.SetXattr(this->root_, d2, kDefault, "", 0).ok());
  EXPECT_EQ(m.GetAttr(d2)->flags, 0u);
  ASSERT_TRUE(m.RemoveXattr(this->root_, d, kDefault).ok());
  for (Ino dir : {d, d2}) {
    auto after = m.Mknod(u077, dir, "after", S_IFREG | 0666, 0);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->second.mode, S_IFREG | 0600u);
  }
}

TYPED_TEST(MetaTest, AclsSurviveDumpAndLoad) {
  Meta& m = *this->m_;
  Ino d = this->Dir("d", kRootIno, 0750);
  ASSERT_TRUE(m.SetXattr(this->root_, d, kDefault, GrantAlice(), 0).ok());
  auto f = m.Mknod(this->root_, d, "f", S_IFREG | 0640, 0);
  ASSERT_TRUE(f.ok());
  std::stringstream dump;
  ASSERT_TRUE(DumpVolume(m.engine(), dump, false, {}, nullptr).ok());
  auto engine = OpenKvEngine("mem://meta_acl_load_" + std::to_string(g_counter++));
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE(LoadVolume(engine->get(), dump, {}, nullptr).ok());
  auto loaded = Meta::Open(std::move(*engine));
  ASSERT_TRUE(loaded.ok());
  Meta& l = **loaded;
  EXPECT_EQ(l.GetAttr(d)->flags, kAttrDefaultAcl);
  EXPECT_EQ(l.GetAttr(f->first)->flags, kAttrAccessAcl);
  EXPECT_EQ(*l.GetXattr(this->root_, d, kDefault), GrantAlice());
  EXPECT_EQ(*l.GetXattr(this->root_, f->first, kAccess), *m.GetXattr(this->root_, f->first, kAccess));
  Ctx alice = Who(1000, 1000);
  EXPECT_TRUE(l.Access(alice, f->first, R_OK).ok());
  EXPECT_EQ(this->Err(l.Access(alice, f->first, W_OK)), EACCES);  // 0640 masked the named rw-
}

// An inode without an ACL costs no read more than before ACLs; one with an ACL costs one
// read more, and only for checks that need it (not for root or the owner).
TYPED_TEST(MetaTest, AclsAreReadOnlyWhenFlagged) {
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  auto counting = std::make_unique<CountingEngine>(std::move(*engine));
  CountingEngine* c = counting.get();
  auto opened = Meta::Open(std::move(counting));
  ASSERT_TRUE(opened.ok());
  Meta& m = **opened;
  Ctx alice = Who(1000, 1000, {}, 022);
  const Ctx& root = this->root_;
  Ino plain = this->Dir("plain", kRootIno, 0777);
  Ino withacl = this->Dir("withacl", kRootIno, 0777);
  ASSERT_TRUE(this->m_->SetXattr(root, withacl, kAccess,
                                 Blob({{kUserObj, 7}, {kUser, 7, 1000}, {kGroupObj, 7}, {kMask, 7}, {kOther, 7}}), 0)
                  .ok());
  ASSERT_TRUE(this->m_->SetXattr(root, withacl, kDefault, GrantAlice(), 0).ok());
  ASSERT_TRUE(m.Mknod(root, plain, "warm-up", S_IFREG | 0644, 0).ok());  // takes a batch of inode numbers
  auto reads = [&](const std::function<bool()>& op) {
    c->reads = 0;
    EXPECT_TRUE(op());
    return c->reads.load();
  };
  for (Ino dir : {plain, withacl}) {
    ASSERT_TRUE(m.Mknod(root, dir, "x", S_IFREG | 0666, 0).ok());
  }
  int lookup = reads([&] { return m.Lookup(alice, plain, "x").ok(); });
  EXPECT_EQ(lookup, 1);  // parent, entry and child in one GetIndirect
  EXPECT_EQ(reads([&] { return m.Lookup(alice, withacl, "x").ok(); }), lookup + 1);
  EXPECT_EQ(reads([&] { return m.Lookup(root, withacl, "x").ok(); }), lookup);
  int create = reads([&] { return m.Mknod(alice, plain, "a", S_IFREG | 0644, 0).ok(); });
  // The ACL for the search check and the default ACL to inherit.
  EXPECT_EQ(reads([&] { return m.Mknod(alice, withacl, "a", S_IFREG | 0644, 0).ok(); }), create + 2);
  EXPECT_EQ(reads([&] { return m.Mknod(root, withacl, "b", S_IFREG | 0644, 0).ok(); }), create + 1);
  Ino pa = m.Lookup(root, plain, "a")->first, wa = m.Lookup(root, withacl, "a")->first;
  Ctx bob = Who(1001, 1001);
  int open = reads([&] { return m.Open(bob, pa, O_RDONLY).ok(); });
  EXPECT_EQ(reads([&] { return m.Open(bob, wa, O_RDONLY).ok(); }), open + 1);
  EXPECT_EQ(reads([&] { return m.Open(alice, wa, O_RDONLY).ok(); }), open);  // the owner
  EXPECT_EQ(reads([&] { return m.GetXattr(alice, pa, kAccess).status().code() == ENODATA; }), 1);
}

// The kernel asks for system.posix_acl_access right after it read an inode's attributes:
// a client that just read them from the engine answers "none" without another read, for
// the attribute-cache window; its own changes and fresher reads end that at once.
TYPED_TEST(MetaTest, AclAbsenceIsKnownRightAfterARead) {
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  auto counting = std::make_unique<CountingEngine>(std::move(*engine));
  CountingEngine* c = counting.get();
  MetaOptions cached;
  cached.dir_attr_cache_ns = 200'000'000;
  auto opened = Meta::Open(std::move(counting), cached);
  ASSERT_TRUE(opened.ok());
  Meta& m = **opened;
  const Ctx& root = this->root_;
  Ino f = this->File("f"), g = this->File("g"), h = this->File("h");
  auto acl_reads = [&](Ino ino, int want_err) {
    c->reads = 0;
    EXPECT_EQ(this->Err(m.GetXattr(root, ino, kAccess)), want_err);
    return c->reads.load();
  };
  EXPECT_EQ(acl_reads(f, ENODATA), 1);  // never read here: ask the engine
  ASSERT_TRUE(m.Lookup(root, kRootIno, "f").ok());
  EXPECT_EQ(acl_reads(f, ENODATA), 0);
  EXPECT_EQ(acl_reads(h, ENODATA), 1);
  ASSERT_TRUE(m.Readdir(root, kRootIno, true).ok());  // readdirplus hands the kernel attributes too
  EXPECT_EQ(acl_reads(h, ENODATA), 0);
  // Another client sets one; a fresher read of the attributes shows it at once.
  ASSERT_TRUE(this->m_->SetXattr(root, f, kAccess, GrantAlice(), 0).ok());
  ASSERT_TRUE(m.GetAttr(f).ok());
  EXPECT_EQ(*m.GetXattr(root, f, kAccess), GrantAlice());
  // This client's own change: at once.
  ASSERT_TRUE(m.Lookup(root, kRootIno, "g").ok());
  ASSERT_TRUE(m.SetXattr(root, g, kAccess, GrantAlice(), 0).ok());
  EXPECT_EQ(*m.GetXattr(root, g, kAccess), GrantAlice());
  // After the window the engine is asked again.
  ASSERT_TRUE(m.RemoveXattr(root, g, kAccess).ok());
  ASSERT_TRUE(m.GetAttr(g).ok());
  EXPECT_EQ(acl_reads(g, ENODATA), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(acl_reads(g, ENODATA), 1);
}

}  // namespace
}  // namespace tierfs
