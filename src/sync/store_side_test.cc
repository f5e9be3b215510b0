// A store side's large objects: parts go up in parallel, whole, and never more of them at
// once over all objects than parts_in_flight (which also bounds their memory).
#include "sync/store_side.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "object/mem_store.h"

namespace tierfs::sync {
namespace {

// Counts the UploadParts running at once (each lasts a little, so that they overlap).
class CountingStore : public MemStore {
 public:
  Status UploadPart(const std::string& key, const std::string& id, int n, std::string_view data) override {
    int now = ++running_;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    Status st = MemStore::UploadPart(key, id, n, data);
    --running_;
    return st;
  }
  int most() const { return most_.load(); }

 private:
  std::atomic<int> running_{0}, most_{0};
};

class StringReader : public Reader {
 public:
  explicit StringReader(const std::string* s) : s_(s) {}
  Result<size_t> Read(uint64_t off, char* buf, size_t n) override {
    if (off >= s_->size()) return size_t{0};
    size_t k = std::min(n, s_->size() - static_cast<size_t>(off));
    std::copy_n(s_->data() + off, k, buf);
    return k;
  }

 private:
  const std::string* s_;
};

// Puts `objects` objects of 7.5 parts each from as many threads; returns the most parts
// that were in flight at once.
int PutInParallel(int objects, int parts_in_flight) {
  std::vector<std::string> all;
  std::vector<std::string>* datas = &all;
  auto owned = std::make_unique<CountingStore>();
  CountingStore* store = owned.get();  // owned by the side, which outlives its use here
  StoreSideOptions o;
  o.part_size = 1024;
  o.part_threads = 4;
  o.parts_in_flight = parts_in_flight;
  auto side = NewStoreSide(std::move(owned), "p/", o);
  datas->clear();
  for (int i = 0; i < objects; ++i) {
    std::string d(7 * 1024 + 512, '\0');
    for (size_t k = 0; k < d.size(); ++k) d[k] = static_cast<char>('a' + (k * 7 + i) % 26);
    datas->push_back(d);
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < objects; ++i) {
    threads.emplace_back([&, i] {
      StringReader r(&(*datas)[i]);
      Source src;
      src.reader = &r;
      src.size = (*datas)[i].size();
      Entry e;
      e.key = "o" + std::to_string(i);
      e.size = src.size;
      if (!side->Put(e, src, false).ok()) failures++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < objects; ++i) {
    auto got = store->Get("p/o" + std::to_string(i));
    EXPECT_TRUE(got.ok() && *got == (*datas)[i]) << "object " << i;
  }
  return store->most();
}

TEST(StoreSide, PartsInFlightBoundOverAllObjects) {
  int bounded = PutInParallel(6, 3);
  EXPECT_LE(bounded, 3);
  EXPECT_GE(bounded, 2);  // still parallel
  int unbounded = PutInParallel(6, 0);
  EXPECT_GT(unbounded, 3);  // 6 objects x 4 parts each could go at once
}

}  // namespace
}  // namespace tierfs::sync
