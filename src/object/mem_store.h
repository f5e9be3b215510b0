// MemStore: an in-memory object store for tests, with fault injection.
//
// Objects live in a sorted map guarded by a mutex. Tests of upper layers use the hooks
// to make calls fail (FailPuts, FailGets, FailDeletes), to run code inside a call
// (SetGetHook, SetPutHook: block, count, sleep), and the counters to check how many calls
// a layer made (for example that a cache fetched a block once).
//
// Objects keep metadata (PutWithMeta); multipart uploads are kept in memory until completed; parts are numbered 1..parts.
// List treats limit 0 as "no limit".
//
// Threads: every method may be called from any thread concurrently. Hooks run on the
// calling thread without the store's lock held, so they may call back into the store.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "object/object_store.h"

namespace tierfs {

class MemStore : public ObjectStore {
 public:
  // name only appears in Describe() ("mem://NAME/") and in messages.
  explicit MemStore(std::string name = "test");
  ~MemStore() override;
  MemStore(const MemStore&) = delete;
  MemStore& operator=(const MemStore&) = delete;

  std::string Describe() const override;
  Status Init() override;
  Status Put(const std::string& key, std::string_view data) override;
  Result<std::string> Get(const std::string& key, uint64_t off = 0, int64_t len = -1) override;
  bool HasObjectMeta() const override { return true; }
  Status PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) override;
  Result<std::string> GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) override;
  Result<ObjectInfo> Head(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override;
  // Pages of 1000 items.
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override;
  Result<std::string> CreateMultipart(const std::string& key) override;
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override;
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override;
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override;

  // Fault injection: the next `times` calls (times < 0: every call until reset) fail with
  // errno err; err = 0 stops failing. Failed calls change nothing but are still counted.
  // FailPuts covers Put, UploadPart and CompleteMultipart.
  void FailPuts(int err, int times = -1);
  void FailGets(int err, int times = -1);
  void FailDeletes(int err, int times = -1);

  // Called with the key at the start of every Get / Put (before fault injection); an
  // empty function removes the hook.
  void SetGetHook(std::function<void(const std::string& key)> hook);
  void SetPutHook(std::function<void(const std::string& key)> hook);

  // Number of calls so far, failed ones included.
  uint64_t puts() const { return puts_.load(); }
  uint64_t gets() const { return gets_.load(); }
  uint64_t heads() const { return heads_.load(); }
  uint64_t deletes() const { return deletes_.load(); }
  uint64_t lists() const { return lists_.load(); }
  void ResetCounters();

  // Number of objects and their total size, for leak checks.
  size_t ObjectCount() const;
  uint64_t TotalBytes() const;

 private:
  struct Object {
    std::string data;
    int64_t mtime_ns = 0;
    std::string meta;
  };
  struct Upload {
    std::string key;
    std::map<int, std::string> parts;
  };
  struct Fault {
    int err = 0;
    int times = 0;  // < 0: unlimited
  };
  // Consumes one injected failure, if any; returns the errno to fail with or 0.
  int TakeFault(Fault* fault);
  Status Injected(const char* op, const std::string& key, int err) const;

  const std::string name_;
  std::atomic<uint64_t> puts_{0}, gets_{0}, heads_{0}, deletes_{0}, lists_{0};
  mutable std::mutex mu_;
  // Everything below is guarded by mu_.
  std::map<std::string, Object> objects_;
  std::map<std::string, Upload> uploads_;
  uint64_t next_upload_ = 1;
  Fault put_fault_, get_fault_, delete_fault_;
  std::function<void(const std::string&)> get_hook_, put_hook_;
};

}  // namespace tierfs
