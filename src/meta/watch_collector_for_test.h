// What a watch collects (KvEngine::Watch), and a check every watching engine passes, for
// the engines' watch tests (etcd, Redis).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "meta/change_watch.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"

namespace tierfs::testing_engines {

struct Collected {
  std::mutex mu;
  std::vector<std::vector<std::string>> batches;
  int alls = 0;
  KvEngine::WatchFn Fn() {
    return [this](const std::vector<std::string>& keys, bool all) {
      std::lock_guard<std::mutex> l(mu);
      if (all) ++alls;
      batches.push_back(keys);
    };
  }
  bool Has(const std::vector<std::string>& want) {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& b : batches) {
      if (b == want) return true;
    }
    return false;
  }
  bool Mentions(const std::string& key) {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& b : batches) {
      for (const auto& k : b) {
        if (k == key) return true;
      }
    }
    return false;
  }
  int Alls() {
    std::lock_guard<std::mutex> l(mu);
    return alls;
  }
  // Waits up to 10 s for a batch equal to want.
  bool WaitFor(const std::vector<std::string>& want) {
    for (int i = 0; i < 200 && !Has(want); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return Has(want);
  }
};

// A commit of b's that writes an inode's attributes and an xattr, a name, a chunk record
// and a counter reaches a's WatchMetaChanges as one attribute change and one name change.
inline void ExpectWatchSaysWhichInodesAndNamesChanged(KvEngine* a, KvEngine* b) {
  std::mutex mu;
  std::vector<MetaChange> changes;
  ASSERT_TRUE(WatchMetaChanges(a, [&](const std::vector<MetaChange>& c, bool) {
                std::lock_guard<std::mutex> l(mu);
                changes.insert(changes.end(), c.begin(), c.end());
              })
                  .ok());
  ASSERT_TRUE(b->Txn([](KvTxn& t) {
                 RETURN_IF_ERROR(t.Put(keys::Inode(7), "attr"));
                 RETURN_IF_ERROR(t.Put(keys::Xattr(7, "system.posix_acl_access"), "acl"));  // the same inode
                 RETURN_IF_ERROR(t.Put(keys::Dentry(1, "name"), "entry"));
                 RETURN_IF_ERROR(t.Put(keys::ChunkRecord(7, 0, 1), "data"));  // not cached by the kernel
                 return t.Put(keys::Counter("nextInode"), "8");
               })
                  .ok());
  auto count = [&] {
    std::lock_guard<std::mutex> l(mu);
    return changes.size();
  };
  for (int i = 0; i < 200 && count() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  StopWatchingMetaChanges(a);
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(changes.size(), 2u);  // in the order the engine reports a commit's keys
  const MetaChange& entry = changes[0].kind == MetaChange::kEntry ? changes[0] : changes[1];
  const MetaChange& attr = changes[0].kind == MetaChange::kAttr ? changes[0] : changes[1];
  EXPECT_EQ(attr.kind, MetaChange::kAttr);
  EXPECT_EQ(attr.ino, 7u);
  EXPECT_EQ(entry.kind, MetaChange::kEntry);
  EXPECT_EQ(entry.parent, 1u);
  EXPECT_EQ(entry.name, "name");
}

}  // namespace tierfs::testing_engines
