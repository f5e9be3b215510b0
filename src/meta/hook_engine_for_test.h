// Test-only: an engine that lets a test act right after a layout read (vfs_test,
// file_reader_test). ScanSpy forwards a transaction and notes whether it scanned (slice map
// reads scan a chunk's records); HookEngine counts such reads and runs a hook after one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meta/kv_engine.h"

namespace tierfs::testing {

class ScanSpy : public KvTxn {
 public:
  ScanSpy(KvTxn& t, bool* scanned) : t_(t), scanned_(scanned) {}
  Result<std::optional<std::string>> Get(std::string_view key) override { return t_.Get(key); }
  Status Put(std::string_view key, std::string_view value) override { return t_.Put(key, value); }
  Status Delete(std::string_view key) override { return t_.Delete(key); }
  Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                              std::string_view prefix, size_t n,
                                                              std::string_view suffix) override {
    return t_.GetIndirect(direct, prefix, n, suffix);
  }
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override {
    return t_.GetMany(keys);
  }
  Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) override {
    *scanned_ = true;
    return t_.Scan(begin, end, limit, fn);
  }
  Status Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) override {
    return t_.Prefetch(keys, prefixes);
  }

 private:
  KvTxn& t_;
  bool* scanned_;
};

// Counts the read-only transactions that scanned and, once armed with AfterNextRead, runs
// the hook right after the next one has ended, on that caller's thread: the caller has
// read, and has not yet used what it read. Any thread may arm it.
class HookEngine : public KvEngine {
 public:
  explicit HookEngine(std::unique_ptr<KvEngine> inner) : inner_(std::move(inner)) {}
  std::string Describe() const override { return inner_->Describe(); }
  Status Reset() override { return inner_->Reset(); }
  Result<DurabilityReport> Durability() override { return inner_->Durability(); }
  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    bool scanned = false;
    Status st = inner_->Txn(
        [&](KvTxn& t) {
          ScanSpy spy(t, &scanned);
          return fn(spy);
        },
        read_only);
    if (read_only && scanned) {
      scans++;
      std::function<void()> hook;
      {
        std::lock_guard<std::mutex> l(mu_);
        hook.swap(after_read_);
      }
      if (hook) hook();
    }
    return st;
  }
  void AfterNextRead(std::function<void()> hook) {
    std::lock_guard<std::mutex> l(mu_);
    after_read_ = std::move(hook);
  }
  std::atomic<int> scans{0};

 private:
  std::unique_ptr<KvEngine> inner_;
  std::mutex mu_;
  std::function<void()> after_read_;
};

}  // namespace tierfs::testing
