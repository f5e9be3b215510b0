#include "meta/timed_engine.h"

#include <chrono>

#include "metrics/metrics.h"

namespace tierfs {
namespace {

struct Series {
  metrics::Histogram* latency[2];  // read-write, read-only
  metrics::Counter* retries[2];
  metrics::Counter* failed[2];
};

const Series& TheSeries() {
  static const Series s = [] {
    Series x;
    auto& r = metrics::Default();
    const char* kinds[2] = {"rw", "ro"};
    for (int k = 0; k < 2; ++k) {
      x.latency[k] = &r.GetHistogram("tierfs_meta_txn_duration_seconds",
                                     "Metadata transactions: latency including retries (count: transactions)",
                                     {{"kind", kinds[k]}});
      x.retries[k] = &r.GetCounter("tierfs_meta_txn_retries_total",
                                   "Metadata transaction attempts run again after a conflict or a lost connection",
                                   {{"kind", kinds[k]}});
      x.failed[k] = &r.GetCounter("tierfs_meta_txn_errors_total",
                                  "Metadata transactions that failed for the engine (EIO, timeouts, lost servers)",
                                  {{"kind", kinds[k]}});
    }
    return x;
  }();
  return s;
}

class TimedEngine final : public KvEngine {
 public:
  explicit TimedEngine(std::unique_ptr<KvEngine> inner) : in_(std::move(inner)) { TheSeries(); }
  std::string Describe() const override { return in_->Describe(); }
  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    const Series& s = TheSeries();
    const int k = read_only ? 1 : 0;
    int attempts = 0;
    auto start = std::chrono::steady_clock::now();
    Status st = in_->Txn(
        [&](KvTxn& t) {
          ++attempts;
          return fn(t);
        },
        read_only);
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    s.latency[k]->ObserveNs(ns);
    metrics::ThisThread().meta_ns += ns;
    if (attempts > 1) s.retries[k]->Add(static_cast<uint64_t>(attempts - 1));
    // Errors of the engine, not answers of the file system (ENOENT, EEXIST, EACCES...).
    if (!st.ok() && (st.code() == EIO || st.code() == ETIMEDOUT || st.code() == ECONNREFUSED ||
                     st.code() == ECONNRESET || st.code() == EHOSTUNREACH || st.code() == ENOTCONN ||
                     st.code() == ENETUNREACH)) {
      s.failed[k]->Add();
    }
    return st;
  }
  Status Reset() override { return in_->Reset(); }
  Status Sync() override { return in_->Sync(); }
  Result<DurabilityReport> Durability() override { return in_->Durability(); }
  Status Watch(WatchFn on_change) override { return in_->Watch(std::move(on_change)); }

 private:
  std::unique_ptr<KvEngine> in_;
};

}  // namespace

std::unique_ptr<KvEngine> WithTxnMetrics(std::unique_ptr<KvEngine> inner) {
  return std::make_unique<TimedEngine>(std::move(inner));
}

}  // namespace tierfs
