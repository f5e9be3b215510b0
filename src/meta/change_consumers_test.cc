// Registered readers of the change log (change_consumers.h) on every engine: while one is
// live, the log after what it read is kept and the data released by commits it has not
// applied is not deleted; once it caught up (or is dropped, or silent for a week) both go.
#include <algorithm>

#include "common/clock.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/meta_test_fixture.h"

namespace tierfs::meta_testing {
namespace {

ChangeConsumer At(uint64_t applied, int64_t updated_ns = NowNanos()) {
  ChangeConsumer c;
  c.name = "mirror:test";
  c.what = "a test";
  c.applied = applied;
  c.updated_ns = updated_ns;
  return c;
}

TYPED_TEST(MetaTest, AConsumerHoldsTheLogAndReleasedDataUntilItHasApplied) {
  this->FormatWithChangeLog();
  KvEngine* e = this->m_->engine();
  std::vector<uint64_t> deleted;
  this->m_->SetSliceDeleter([&](uint64_t id, uint32_t) {
    deleted.push_back(id);
    return Status::OK();
  });
  Ino f = this->File("f");
  this->Dir("d");
  uint64_t first = 0;
  this->WriteSlice(f, 0, 0, 4096, &first);
  const uint64_t before = ChangeLogRange(e)->last;
  ASSERT_TRUE(PutChangeConsumer(e, At(before)).ok());
  // Removed: its slice is released by a commit the consumer has not applied.
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  const uint64_t released = ChangeLogRange(e)->last;
  ASSERT_GT(released, before);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_TRUE(std::find(deleted.begin(), deleted.end(), first) == deleted.end()) << "deleted while a mirror lags";
  // The log after `before` stays however old it is; what came before it goes.
  ASSERT_TRUE(TrimChangeLog(e, NowNanos() + 3600'000'000'000, *ChangeConsumersFloor(e, NowNanos()).value() + 1).ok());
  EXPECT_EQ(ChangeLogRange(e)->first, before + 1);
  // Caught up: the slice goes at the next round.
  ASSERT_TRUE(PutChangeConsumer(e, At(ChangeLogRange(e)->last)).ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_TRUE(std::find(deleted.begin(), deleted.end(), first) != deleted.end());
  auto all = ReadChangeConsumers(e);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].what, "a test");
}

TYPED_TEST(MetaTest, ASilentOrDroppedConsumerHoldsNothing) {
  this->FormatWithChangeLog();
  KvEngine* e = this->m_->engine();
  // Not logged itself: registering is not a change of the namespace.
  const uint64_t last = ChangeLogRange(e)->last;
  ASSERT_TRUE(PutChangeConsumer(e, At(0, NowNanos() - kConsumerExpiryNs - 1)).ok());
  EXPECT_EQ(ChangeLogRange(e)->last, last);
  EXPECT_FALSE(ChangeConsumersFloor(e, NowNanos())->has_value());
  ASSERT_TRUE(PutChangeConsumer(e, At(0)).ok());
  EXPECT_EQ(**ChangeConsumersFloor(e, NowNanos()), 0u);
  EXPECT_EQ(DropChangeConsumer(e, "mirror:other").code(), ENOENT);
  ASSERT_TRUE(DropChangeConsumer(e, "mirror:test").ok());
  EXPECT_FALSE(ChangeConsumersFloor(e, NowNanos())->has_value());
  // A damaged record is an error that says how to remove it.
  ASSERT_TRUE(e->Txn([](KvTxn& t) { return t.Put(ChangeConsumerKey("x"), "{"); }).ok());
  auto bad = ReadChangeConsumers(e);
  EXPECT_EQ(bad.status().code(), EIO);
  EXPECT_NE(bad.status().message().find("--drop-consumer"), std::string::npos);
}

}  // namespace
}  // namespace tierfs::meta_testing
