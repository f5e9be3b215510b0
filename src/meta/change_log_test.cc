// The change log (change_log.h) on every engine: one record per committed change, in
// commit order with no gaps, each holding the whole write set of its transaction; nothing
// for failed operations or access times; trimming keeps the newest.
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/encoding.h"
#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/meta_test_fixture.h"

namespace tierfs::meta_testing {
namespace {


std::vector<ChangeRecord> All(KvEngine* e) {
  std::vector<ChangeRecord> out;
  EXPECT_TRUE(ReadChanges(e, 1, 0, [&](const ChangeRecord& r) {
                out.push_back(r);
                return true;
              }).ok());
  return out;
}

bool Has(const ChangeRecord& r, const std::string& key, bool put) {
  for (const auto& [k, v] : r.writes) {
    if (k == key) return v.has_value() == put;
  }
  return false;
}

TYPED_TEST(MetaTest, ChangeLogRecordsEachChangeInCommitOrder) {
  this->FormatWithChangeLog();
  KvEngine* e = this->m_->engine();
  const size_t before = All(e).size();  // the session's own keys are not logged: none

  Ino d = this->Dir("d");
  Ino f = this->File("f", d);
  ASSERT_TRUE(this->m_->Rename(this->root_, d, "f", d, "g", 0).ok());
  ASSERT_TRUE(this->m_->SetXattr(this->root_, f, "user.k", "v", 0).ok());
  EXPECT_EQ(this->Err(this->m_->Mkdir(this->root_, kRootIno, "d", 0755)), EEXIST);  // fails: no record
  ASSERT_TRUE(this->m_->TouchAtimes({{f, NowNanos() + 1000000000}}, AtimeMode::kStrict).ok());  // not logged
  ASSERT_TRUE(this->m_->Unlink(this->root_, d, "g", false).ok());

  auto recs = All(e);
  ASSERT_EQ(recs.size(), before + 5);
  for (size_t i = 0; i < recs.size(); ++i) EXPECT_EQ(recs[i].seq, i + 1);  // no gap
  std::vector<ChangeRecord> r(recs.begin() + static_cast<long>(before), recs.end());
  EXPECT_TRUE(Has(r[0], keys::Dentry(kRootIno, "d"), true));
  EXPECT_TRUE(Has(r[0], keys::Inode(d), true));
  EXPECT_TRUE(Has(r[1], keys::Dentry(d, "f"), true));
  EXPECT_TRUE(Has(r[1], keys::Inode(f), true));
  // A rename is one record: the old name's removal and the new name together.
  EXPECT_TRUE(Has(r[2], keys::Dentry(d, "f"), false));
  EXPECT_TRUE(Has(r[2], keys::Dentry(d, "g"), true));
  EXPECT_TRUE(Has(r[3], keys::Xattr(f, "user.k"), true));
  EXPECT_TRUE(Has(r[4], keys::Dentry(d, "g"), false));
  for (const ChangeRecord& x : r) {
    EXPECT_GE(x.time_ns, r[0].time_ns);
    for (const auto& [k, v] : x.writes) EXPECT_TRUE(IsLoggedKey(k)) << keys::Describe(k);
  }
  auto bounds = ChangeLogRange(e);
  ASSERT_TRUE(bounds.ok());
  EXPECT_EQ(bounds->first, 1u);
  EXPECT_EQ(bounds->last, recs.size());

  // Trimming removes what is older than the cutoff but never the newest record.
  auto trimmed = TrimChangeLog(e, NowNanos() + 3600'000'000'000);
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(*trimmed, recs.size() - 1);
  bounds = ChangeLogRange(e);
  EXPECT_EQ(bounds->first, recs.size());
  EXPECT_EQ(bounds->last, recs.size());
  this->Dir("after");
  EXPECT_EQ(ChangeLogRange(e)->last, recs.size() + 1);

  // A damaged record is an error naming it, never skipped.
  ASSERT_TRUE(e->Txn([&](KvTxn& t) { return t.Put(ChangeRecordKey(recs.size() + 1), std::string("\x01\x02", 2)); })
                  .ok());
  Status st = ReadChanges(e, 1, 0, [](const ChangeRecord&) { return true; });
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find(std::to_string(recs.size() + 1)), std::string::npos) << st.ToString();
}

size_t LogKeys(KvEngine* e) {
  size_t n = 0;
  EXPECT_TRUE(e->Txn(
                   [&](KvTxn& t) {
                     n = 0;
                     return t.Scan(ChangeRecordKey(0), ChangeRecordKey(UINT64_MAX), 0, [&](std::string_view, std::string_view) {
                       ++n;
                       return true;
                     });
                   },
                   true)
                  .ok());
  return n;
}

bool SameRecords(const std::vector<ChangeRecord>& a, const std::vector<ChangeRecord>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].seq != b[i].seq || a[i].time_ns != b[i].time_ns || a[i].writes != b[i].writes) return false;
  }
  return true;
}

// Old records packed into blocks (change_log.h) read back as the same records, from any
// sequence, on every engine; a block is trimmed whole and only once nobody needs it.
TYPED_TEST(MetaTest, ChangeLogBlocksReadAsTheRecordsTheyHold) {
  this->FormatWithChangeLog();
  KvEngine* e = this->m_->engine();
  Ino d = this->Dir("d");
  for (int i = 0; i < 150; ++i) this->File("f" + std::to_string(i), d);
  const auto before = All(e);
  const uint64_t n = before.size();
  ASSERT_GE(n, 151u);
  const int64_t later = NowNanos() + 3600'000'000'000;
  // A recent record is left alone.
  EXPECT_EQ(*CompactChangeLog(e, NowNanos() - 60'000'000'000), 0u);
  auto packed = CompactChangeLog(e, later);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  EXPECT_EQ(*packed, n);
  EXPECT_EQ(LogKeys(e), 1u);  // one block, keyed by the newest record
  EXPECT_TRUE(SameRecords(All(e), before));
  EXPECT_EQ(ChangeLogRange(e)->first, 1u);
  EXPECT_EQ(ChangeLogRange(e)->last, n);
  std::vector<ChangeRecord> mid;
  ASSERT_TRUE(ReadChanges(e, 100, 10, [&](const ChangeRecord& r) {
                mid.push_back(r);
                return true;
              }).ok());
  EXPECT_TRUE(SameRecords(mid, std::vector<ChangeRecord>(before.begin() + 99, before.begin() + 109)));

  // A short run stays single; a long enough one becomes a second block.
  for (int i = 0; i < 5; ++i) this->File("g" + std::to_string(i), d);
  EXPECT_EQ(*CompactChangeLog(e, later), 0u);
  for (int i = 0; i < 70; ++i) this->File("h" + std::to_string(i), d);
  auto all = All(e);
  EXPECT_EQ(all.size(), n + 75);
  EXPECT_EQ(*CompactChangeLog(e, later), 75u);
  EXPECT_EQ(LogKeys(e), 2u);
  EXPECT_TRUE(SameRecords(All(e), all));

  // A reader holding from n + 10 keeps the second block whole.
  auto trimmed = TrimChangeLog(e, later, n + 10);
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(ChangeLogRange(e)->first, n + 1);
  EXPECT_TRUE(SameRecords(All(e), std::vector<ChangeRecord>(all.begin() + static_cast<long>(n), all.end())));

  // A damaged block is an error naming its records.
  std::string bad(1, '\xff');
  PutU64(&bad, n + 1);
  PutU64(&bad, n + 75);
  PutU64(&bad, 1);
  bad += "not zstd";
  ASSERT_TRUE(e->Txn([&](KvTxn& t) { return t.Put(ChangeRecordKey(n + 75), bad); }).ok());
  Status st = ReadChanges(e, n + 1, 0, [](const ChangeRecord&) { return true; });
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("change records " + std::to_string(n + 1) + " to " + std::to_string(n + 75)),
            std::string::npos)
      << st.ToString();
}

// Trimming and packing read only the keys they change in their read-write transaction: what
// another client changed in between is left alone (a block it wrote is not deleted).
TYPED_TEST(MetaTest, ChangeLogKeysChangedMeanwhileAreLeftAlone) {
  KvEngine* e = this->m_->engine();
  std::vector<std::pair<std::string, std::string>> seen;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    seen.emplace_back(ChangeRecordKey(seq), "r" + std::to_string(seq));
    ASSERT_TRUE(e->Txn([&](KvTxn& t) { return t.Put(seen.back().first, seen.back().second); }).ok());
  }
  // Another client rewrote record 3 (packed it, say) after these were read.
  ASSERT_TRUE(e->Txn([&](KvTxn& t) { return t.Put(ChangeRecordKey(3), "block"); }).ok());
  std::pair<std::string, std::string> put{ChangeRecordKey(3), "mine"};
  auto r = ReplaceUnchanged(e, seen, &put);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 2u);  // not all: nothing written
  std::optional<std::string> v;
  ASSERT_TRUE(e->Txn([&](KvTxn& t) -> Status {
                 ASSIGN_OR_RETURN(v, t.Get(ChangeRecordKey(1)));
                 return Status::OK();
               }).ok());
  EXPECT_EQ(v, "r1");
  r = ReplaceUnchanged(e, seen, nullptr);  // trimming: the unchanged ones go
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2u);
  ASSERT_TRUE(e->Txn([&](KvTxn& t) -> Status {
                 ASSIGN_OR_RETURN(auto one, t.Get(ChangeRecordKey(1)));
                 EXPECT_FALSE(one.has_value());
                 ASSIGN_OR_RETURN(v, t.Get(ChangeRecordKey(3)));
                 return Status::OK();
               }).ok());
  EXPECT_EQ(v, "block");
}

// Every engine watches a logged volume: etcd and Redis push, the others are polled
// (meta/change_log_watch.h). Another client's commits are reported, this one's are not.
TYPED_TEST(MetaTest, ChangeLogWatchReportsOtherClientsCommitsNotItsOwn) {
  this->FormatWithChangeLog();
  auto other = this->Open(false);
  KvEngine* e = this->m_->engine();
  std::mutex mu;
  std::set<std::string> seen;
  ASSERT_TRUE(e->Watch([&](const std::vector<std::string>& keys, bool) {
                 std::lock_guard<std::mutex> l(mu);
                 seen.insert(keys.begin(), keys.end());
               }).ok());
  const std::string mine = keys::Dentry(kRootIno, "mine"), theirs = keys::Dentry(kRootIno, "theirs");
  for (int i = 0; i < 20; ++i) this->File("mine" + std::to_string(i));
  this->Dir("mine");
  ASSERT_TRUE(other->Mkdir(this->root_, kRootIno, "theirs", 0755).ok());
  bool got = false;
  for (int i = 0; i < 200 && !got; ++i) {  // records come in commit order: "mine" before "theirs"
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<std::mutex> l(mu);
    got = seen.count(theirs) != 0;
  }
  ASSERT_TRUE(e->Watch(nullptr).ok());
  EXPECT_TRUE(got) << "another client's mkdir was never reported";
  EXPECT_EQ(seen.count(mine), 0u) << "this client's own commit was reported";
  for (int i = 0; i < 20; ++i) EXPECT_EQ(seen.count(keys::Dentry(kRootIno, "mine" + std::to_string(i))), 0u);
}

TYPED_TEST(MetaTest, NoChangeLogUnlessTheVolumeAsks) {
  this->Dir("d");
  auto bounds = ChangeLogRange(this->m_->engine());
  ASSERT_TRUE(bounds.ok());
  EXPECT_EQ(bounds->last, 0u);
}

}  // namespace
}  // namespace tierfs::meta_testing
