#include "object/timed_store.h"

#include <chrono>

#include "metrics/metrics.h"

namespace tierfs {
namespace {

enum Kind { kGet, kPut, kHead, kDelete, kList, kMultipart, kKinds };
const char* const kKindNames[kKinds] = {"get", "put", "head", "delete", "list", "multipart"};

struct Series {
  metrics::Histogram* latency[kKinds];
  metrics::Counter* errors[kKinds];
  metrics::Counter* bytes_in;
  metrics::Counter* bytes_out;
};

const Series& TheSeries() {
  static const Series s = [] {
    Series x;
    auto& r = metrics::Default();
    for (int k = 0; k < kKinds; ++k) {
      x.latency[k] = &r.GetHistogram("tierfs_object_request_duration_seconds",
                                     "Object store requests by kind: latency (its count is the number of requests)",
                                     {{"kind", kKindNames[k]}});
      x.errors[k] = &r.GetCounter("tierfs_object_request_errors_total", "Object store requests that failed",
                                  {{"kind", kKindNames[k]}});
    }
    x.bytes_in = &r.GetCounter("tierfs_object_bytes_total", "Bytes read from and written to the object store",
                               {{"direction", "download"}});
    x.bytes_out = &r.GetCounter("tierfs_object_bytes_total", "Bytes read from and written to the object store",
                                {{"direction", "upload"}});
    return x;
  }();
  return s;
}

class Timer {
 public:
  explicit Timer(Kind k) : k_(k), start_(std::chrono::steady_clock::now()) {}
  template <typename S>
  const S& Done(const S& st) {
    const Series& s = TheSeries();
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
    s.latency[k_]->ObserveNs(ns);
    metrics::ThisThread().store_ns += ns;
    if (!st.ok() && st.status().code() != ENOENT) s.errors[k_]->Add();
    return st;
  }
  Status Done(const Status& st) {
    const Series& s = TheSeries();
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
    s.latency[k_]->ObserveNs(ns);
    metrics::ThisThread().store_ns += ns;
    if (!st.ok() && st.code() != ENOENT) s.errors[k_]->Add();
    return st;
  }

 private:
  Kind k_;
  std::chrono::steady_clock::time_point start_;
};

class TimedStore final : public ObjectStore {
 public:
  explicit TimedStore(std::unique_ptr<ObjectStore> inner) : in_(std::move(inner)) { TheSeries(); }
  std::string Describe() const override { return in_->Describe(); }
  Status Init() override { return in_->Init(); }
  Status Put(const std::string& key, std::string_view data) override {
    Timer t(kPut);
    Status st = t.Done(in_->Put(key, data));
    if (st.ok()) TheSeries().bytes_out->Add(data.size());
    return st;
  }
  Status PutParts(const std::string& key, const std::vector<std::string_view>& parts) override {
    Timer t(kPut);
    Status st = t.Done(in_->PutParts(key, parts));
    if (st.ok()) {
      for (auto p : parts) TheSeries().bytes_out->Add(p.size());
    }
    return st;
  }
  Result<std::string> Get(const std::string& key, uint64_t off, int64_t len) override {
    Timer t(kGet);
    auto r = in_->Get(key, off, len);
    t.Done(r);
    if (r.ok()) TheSeries().bytes_in->Add(r->size());
    return r;
  }
  Result<ObjectInfo> Head(const std::string& key) override {
    Timer t(kHead);
    auto r = in_->Head(key);
    t.Done(r);
    return r;
  }
  Status Delete(const std::string& key) override {
    Timer t(kDelete);
    return t.Done(in_->Delete(key));
  }
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override {
    Timer t(kList);
    auto r = in_->List(prefix, start_after, limit);
    t.Done(r);
    return r;
  }
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override {
    Timer t(kList);
    auto r = in_->ListLevel(prefix, token);
    t.Done(r);
    return r;
  }
  Result<std::string> CreateMultipart(const std::string& key) override {
    Timer t(kMultipart);
    auto r = in_->CreateMultipart(key);
    t.Done(r);
    return r;
  }
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override {
    Timer t(kMultipart);
    Status st = t.Done(in_->UploadPart(key, upload_id, part_num, data));
    if (st.ok()) TheSeries().bytes_out->Add(data.size());
    return st;
  }
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override {
    Timer t(kMultipart);
    return t.Done(in_->CompleteMultipart(key, upload_id, parts));
  }
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override {
    Timer t(kMultipart);
    return t.Done(in_->AbortMultipart(key, upload_id));
  }
  bool HasObjectMeta() const override { return in_->HasObjectMeta(); }
  Status PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) override {
    Timer t(kPut);
    Status st = t.Done(in_->PutWithMeta(key, data, meta));
    if (st.ok()) TheSeries().bytes_out->Add(data.size());
    return st;
  }
  Result<std::string> GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) override {
    Timer t(kGet);
    auto r = in_->GetWithMeta(key, off, len, meta);
    t.Done(r);
    if (r.ok()) TheSeries().bytes_in->Add(r->size());
    return r;
  }
  Status Sync() override { return in_->Sync(); }
  std::optional<StoreSpace> Space() const override { return in_->Space(); }

 private:
  std::unique_ptr<ObjectStore> in_;
};

}  // namespace

std::unique_ptr<ObjectStore> WithRequestMetrics(std::unique_ptr<ObjectStore> inner) {
  return std::make_unique<TimedStore>(std::move(inner));
}

}  // namespace tierfs
