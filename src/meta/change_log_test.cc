// The change log (change_log.h) on every engine: one record per committed change, in
// commit order with no gaps, each holding the whole write set of its transaction; nothing
// for failed operations or access times; trimming keeps the newest.
#include <optional>
#include <set>

#include "common/clock.h"
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

TYPED_TEST(MetaTest, NoChangeLogUnlessTheVolumeAsks) {
  this->Dir("d");
  auto bounds = ChangeLogRange(this->m_->engine());
  ASSERT_TRUE(bounds.ok());
  EXPECT_EQ(bounds->last, 0u);
}

}  // namespace
}  // namespace tierfs::meta_testing
