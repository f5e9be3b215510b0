// Test-only: an in-memory ObjectStore with fault injection and call counters, shared by
// the chunk tests. Any thread may call it.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "object/object_store.h"

namespace tierfs::testing {

// n reproducible pseudo-random bytes.
inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class FakeStore : public ObjectStore {
 public:
  // Fault injection. An errno of 0 disables it. fail_*_count < 0 fails every call; n > 0
  // fails the next n calls.
  std::atomic<int> put_errno{0};
  std::atomic<int> put_fail_count{-1};
  std::atomic<int> get_errno{0};
  std::atomic<int> get_delay_ms{0};
  std::atomic<int> put_delay_ms{0};

  // Counters.
  std::atomic<int> puts{0};
  std::atomic<int> gets{0};
  std::atomic<int> ranged_gets{0};
  std::atomic<int> deletes{0};

  // While held, puts wait (to keep uploads in flight).
  void HoldPuts(bool hold) {
    {
      std::lock_guard<std::mutex> l(mu_);
      hold_puts_ = hold;
    }
    cv_.notify_all();
  }

  bool Has(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    return objects_.count(key) != 0;
  }
  std::string Data(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    return objects_.at(key);
  }
  void Set(const std::string& key, std::string data) {
    std::lock_guard<std::mutex> l(mu_);
    objects_[key] = std::move(data);
  }
  void Remove(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    objects_.erase(key);
  }
  size_t Count() {
    std::lock_guard<std::mutex> l(mu_);
    return objects_.size();
  }
  std::map<std::string, std::string> Objects() {
    std::lock_guard<std::mutex> l(mu_);
    return objects_;
  }

  std::string Describe() const override { return "fake://"; }
  Status Init() override { return Status::OK(); }

  Status Put(const std::string& key, std::string_view data) override {
    puts++;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return !hold_puts_; });
    }
    if (int ms = put_delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (int err = put_errno.load(); err != 0 && ShouldFail(&put_fail_count)) {
      return Status::Err(err, "injected put failure for " + key);
    }
    std::lock_guard<std::mutex> l(mu_);
    objects_[key] = std::string(data);
    return Status::OK();
  }

  Result<std::string> Get(const std::string& key, uint64_t off, int64_t len) override {
    gets++;
    if (off != 0 || len >= 0) ranged_gets++;
    if (int ms = get_delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (int err = get_errno.load()) return Status::Err(err, "injected get failure for " + key);
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return Status::Err(ENOENT, "no such object: " + key);
    if (off >= it->second.size()) return std::string();
    return it->second.substr(off, len < 0 ? std::string::npos : static_cast<size_t>(len));
  }

  Result<ObjectInfo> Head(const std::string& key) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return Status::Err(ENOENT, "no such object: " + key);
    return ObjectInfo{key, it->second.size(), 0, ""};
  }

  Status Delete(const std::string& key) override {
    deletes++;
    std::lock_guard<std::mutex> l(mu_);
    objects_.erase(key);
    return Status::OK();
  }

  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<ObjectInfo> out;
    for (auto it = objects_.upper_bound(start_after); it != objects_.end() && out.size() < limit; ++it) {
      if (it->first.compare(0, prefix.size(), prefix) == 0) out.push_back(ObjectInfo{it->first, it->second.size(), 0, ""});
    }
    return out;
  }

  Result<std::string> CreateMultipart(const std::string&) override {
    return Status::Err(ENOTSUP, "multipart not supported by the fake");
  }
  Status UploadPart(const std::string&, const std::string&, int, std::string_view) override {
    return Status::Err(ENOTSUP, "multipart not supported by the fake");
  }
  Status CompleteMultipart(const std::string&, const std::string&, int) override {
    return Status::Err(ENOTSUP, "multipart not supported by the fake");
  }
  Status AbortMultipart(const std::string&, const std::string&) override {
    return Status::Err(ENOTSUP, "multipart not supported by the fake");
  }

 private:
  static bool ShouldFail(std::atomic<int>* count) {
    int n = count->load();
    while (n > 0) {
      if (count->compare_exchange_weak(n, n - 1)) return true;
    }
    return n < 0;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_puts_ = false;
  std::map<std::string, std::string> objects_;
};

}  // namespace tierfs::testing
