#include "sync/store_side.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <deque>
#include <mutex>
#include <semaphore>
#include <thread>
#include <vector>

#include "sync/store_lister.h"

namespace tierfs::sync {
namespace {

class StoreReader : public Reader {
 public:
  StoreReader(ObjectStore* store, std::string key) : store_(store), key_(std::move(key)) {}
  Result<size_t> Read(uint64_t off, char* buf, size_t n) override {
    auto got = store_->Get(key_, off, static_cast<int64_t>(n));
    if (!got.ok()) return got.status();
    size_t m = std::min(n, got->size());
    std::copy(got->data(), got->data() + m, buf);
    return m;
  }

 private:
  ObjectStore* store_;
  std::string key_;
};

class StoreSide : public Side {
 public:
  StoreSide(std::unique_ptr<ObjectStore> store, std::string prefix, StoreSideOptions o)
      : store_(std::move(store)), prefix_(std::move(prefix)), o_(o) {
    if (o_.parts_in_flight > 0) slots_ = std::make_unique<std::counting_semaphore<>>(o_.parts_in_flight);
  }

  std::string Describe() const override { return store_->Describe() + prefix_; }
  bool posix() const override { return false; }
  int64_t mtime_precision_ns() const override { return 1000000000; }

  Result<std::unique_ptr<KeyStream>> List(const std::string& start, const Descend&,
                                          const Children& = nullptr) override {
    return ListStore(store_.get(), prefix_, start, list_threads_);
  }
  void SetListThreads(int n) override { list_threads_ = n; }

  Result<std::unique_ptr<Reader>> Open(const Entry& e) override {
    return std::unique_ptr<Reader>(new StoreReader(store_.get(), prefix_ + e.key));
  }

  Status Put(const Entry& e, Source& src, bool) override {
    std::string key = prefix_ + e.key;
    if (src.size <= o_.part_size) {
      std::string data(src.size, '\0');
      RETURN_IF_ERROR(ReadExactly(src, 0, data.data(), data.size()));
      return store_->Put(key, data);
    }
    return PutParts(key, src);
  }

  Status Mkdir(const Entry& e) override { return store_->Put(prefix_ + e.key, ""); }

  Status Remove(const Entry& e) override { return store_->Delete(prefix_ + e.key); }

 private:
  static Status ReadExactly(Source& src, uint64_t off, char* buf, size_t n) {
    ASSIGN_OR_RETURN(size_t got, src.reader->Read(off, buf, n));
    if (got < n) return Status::Err(EAGAIN, "the source became shorter while it was copied");
    if (src.on_bytes) src.on_bytes(buf, n);
    return Status::OK();
  }

  // A multipart upload whose parts go up from part_threads threads; the reader is used by
  // one of them at a time, and each part's bytes are read just before it is sent, so at
  // most part_threads parts are in memory.
  Status PutParts(const std::string& key, Source& src) {
    ASSIGN_OR_RETURN(std::string id, store_->CreateMultipart(key));
    int parts = static_cast<int>((src.size + o_.part_size - 1) / o_.part_size);
    std::atomic<int> next{0};
    std::mutex mu;  // the reader, on_bytes and first_error
    Status first_error;
    auto work = [&] {
      std::string buf;
      for (;;) {
        int n = next.fetch_add(1);
        if (n >= parts) return;
        PartSlot slot(slots_.get());
        uint64_t off = static_cast<uint64_t>(n) * o_.part_size;
        size_t len = static_cast<size_t>(std::min<uint64_t>(o_.part_size, src.size - off));
        buf.resize(len);
        {
          std::lock_guard<std::mutex> l(mu);
          if (!first_error.ok()) return;
          Status st = ReadExactly(src, off, buf.data(), len);
          if (!st.ok()) {
            first_error = st;
            return;
          }
        }
        Status st = store_->UploadPart(key, id, n + 1, buf);
        if (!st.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (first_error.ok()) first_error = st;
          return;
        }
      }
    };
    std::vector<std::thread> threads;
    int t = std::max(1, std::min(o_.part_threads, parts));
    for (int i = 0; i < t; ++i) threads.emplace_back(work);
    for (auto& th : threads) th.join();
    if (first_error.ok()) first_error = store_->CompleteMultipart(key, id, parts);
    if (!first_error.ok()) {
      (void)store_->AbortMultipart(key, id);
      return first_error;
    }
    return Status::OK();
  }

  // One of o_.parts_in_flight (slots_; none to take without a limit), held from reading a
  // part until it is sent.
  class PartSlot {
   public:
    explicit PartSlot(std::counting_semaphore<>* slots) : slots_(slots) {
      if (slots_) slots_->acquire();
    }
    ~PartSlot() {
      if (slots_) slots_->release();
    }
    PartSlot(const PartSlot&) = delete;
    PartSlot& operator=(const PartSlot&) = delete;

   private:
    std::counting_semaphore<>* slots_;
  };

  std::unique_ptr<ObjectStore> store_;
  std::string prefix_;
  StoreSideOptions o_;
  std::unique_ptr<std::counting_semaphore<>> slots_;
  int list_threads_ = 1;
};

}  // namespace

std::unique_ptr<Side> NewStoreSide(std::unique_ptr<ObjectStore> store, std::string prefix, StoreSideOptions options) {
  return std::make_unique<StoreSide>(std::move(store), std::move(prefix), options);
}

}  // namespace tierfs::sync
