// A run's summary is exact with many tiny copies over many threads, between two in-memory
// stores: each key counted once, and a second run skips them all. (The ordering of the
// watermarks that the summary is built from is tested deterministically in window_test.)
#include "sync/syncer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "object/mem_store.h"
#include "sync/store_side.h"

namespace tierfs::sync {
namespace {

TEST(Syncer, CountsAddUpUnderManyThreads) {
  // Several runs, so that an interleaving that loses a count has chances to happen.
  constexpr int kKeys = 4000;
  for (int run = 0; run < 5; ++run) {
    auto src_store = std::make_unique<MemStore>();
    for (int i = 0; i < kKeys; ++i) {
      ASSERT_TRUE(src_store->Put("k" + std::to_string(i), std::string(i % 7, 'x')).ok());
    }
    auto src = NewStoreSide(std::move(src_store), "");
    auto dst = NewStoreSide(std::make_unique<MemStore>(), "");
    SyncOptions o;
    o.threads = 32;
    Progress p;
    auto c = RunSync(src.get(), dst.get(), o, &p);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->found, static_cast<uint64_t>(kKeys)) << "run " << run;
    EXPECT_EQ(c->copied, static_cast<uint64_t>(kKeys)) << "run " << run;
    EXPECT_EQ(c->found, c->copied + c->skipped + c->failed) << "run " << run;
    // A second run finds everything there: every key skipped, none lost from the count.
    Progress p2;
    auto again = RunSync(src.get(), dst.get(), o, &p2);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->skipped, static_cast<uint64_t>(kKeys)) << "run " << run;
    EXPECT_EQ(again->copied, 0u) << "run " << run;
  }
}

}  // namespace
}  // namespace tierfs::sync
