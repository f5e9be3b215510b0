// The cleaners of several clients share the released slices (meta_pending_slices.cc):
// each block is deleted once, a failed deletion is retried at once by whoever comes next.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

TYPED_TEST(MetaTest, TwoCleanersDeleteEachBlockOnce) {
  constexpr int kFiles = 150;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kFiles; ++i) {
    Ino f = this->File("f" + std::to_string(i));
    uint64_t id;
    this->WriteSlice(f, 0, 0, 100, &id);
    ids.push_back(id);
    ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f" + std::to_string(i)).ok());
  }
  auto other = this->Open(false);
  std::mutex mu;
  std::map<uint64_t, int> deleted;
  auto deleter = [&](uint64_t id, uint32_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a store's DELETE: both cleaners overlap
    std::lock_guard<std::mutex> l(mu);
    ++deleted[id];
    return Status::OK();
  };
  this->m_->SetSliceDeleter(deleter);
  other->SetSliceDeleter(deleter);
  auto rounds = [](Meta* m) {
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(m->RunCleanupOnce().ok());
  };
  std::thread a(rounds, this->m_.get()), b(rounds, other.get());
  a.join();
  b.join();
  EXPECT_EQ(deleted.size(), ids.size());
  int twice = 0;
  for (uint64_t id : ids) {
    EXPECT_EQ(deleted.count(id), 1u) << "slice " << id << " was never deleted";
    if (deleted[id] > 1) ++twice;
  }
  EXPECT_EQ(twice, 0) << "slices deleted by both cleaners";
  EXPECT_TRUE(this->m_->PendingSlices()->empty());
}

TYPED_TEST(MetaTest, AFailedDeletionIsGivenBackAtOnce) {
  Ino f = this->File("f");
  uint64_t id;
  this->WriteSlice(f, 0, 0, 100, &id);
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  int tries = 0;
  this->m_->SetSliceDeleter([&](uint64_t, uint32_t) {
    ++tries;
    return Status::Err(EIO, "the store is down");
  });
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_EQ(tries, 1);
  // Another client (or the next round) finds it due again, not claimed for kClaimNs.
  auto other = this->Open(false);
  int done = 0;
  other->SetSliceDeleter([&](uint64_t got, uint32_t) {
    EXPECT_EQ(got, id);
    ++done;
    return Status::OK();
  });
  ASSERT_TRUE(other->RunCleanupOnce().ok());
  EXPECT_EQ(done, 1);
  EXPECT_TRUE(other->PendingSlices()->empty());
}

}  // namespace
}  // namespace tierfs
