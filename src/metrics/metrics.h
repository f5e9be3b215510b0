// Process-wide metrics in the Prometheus text exposition format (version 0.0.4).
//
// Counters and histograms are updated on hot paths with relaxed atomics only (no lock, no
// allocation); gauges and counters kept elsewhere (cache sizes, store counters) come from
// collectors, functions called when the metrics are rendered. Every sample carries the
// registry's constant labels (volume, mount point).
//
// Threads: everything may be called from any thread. Families are created once (at first
// use, under a lock) and live as long as the process.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tierfs::metrics {

// Latency buckets in seconds, 100 us to 10 s.
inline constexpr std::array<double, 16> kLatencyBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                           0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                           1,      2.5,     5,      10};

class Counter {
 public:
  void Add(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class Histogram {
 public:
  void Observe(double seconds);
  void ObserveNs(int64_t ns) { Observe(static_cast<double>(ns) / 1e9); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9; }
  // Cumulative counts per bucket (le), as rendered.
  std::array<uint64_t, kLatencyBuckets.size()> Cumulative() const;

 private:
  std::array<std::atomic<uint64_t>, kLatencyBuckets.size()> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

// One label set, e.g. {{"op", "read"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

// What a collector reports: a sample of a family it names.
struct Sample {
  std::string name;  // family name, e.g. "tierfs_cache_bytes"
  Labels labels;
  double value = 0;
};
struct CollectedFamily {
  std::string name, help, type;  // type: "counter" or "gauge"
  std::vector<Sample> samples;
};
using Collector = std::function<void(std::vector<CollectedFamily>* out)>;

class Registry {
 public:
  // The counter or histogram of family `name` with these labels, made on first use. The
  // returned reference stays valid for the process's life: keep it (a static or member) on
  // hot paths instead of looking it up each time.
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help, const Labels& labels = {});
  void AddCollector(Collector c);
  // Labels added to every sample (volume, mountpoint); set before serving.
  void SetConstLabels(Labels labels);
  // The whole registry in the Prometheus text format.
  std::string Render();
  // Every counter and histogram (count and sum) and collected sample as flat JSON:
  // {"name{label=\"v\"}": value, ...} (tierfs stats).
  std::string SnapshotJson();

 private:
  struct Family {
    std::string help, type;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  std::mutex mu_;
  std::map<std::string, Family> families_;  // guarded by mu_
  std::vector<Collector> collectors_;        // guarded by mu_
  Labels const_labels_;                      // guarded by mu_
};

// The process's registry.
Registry& Default();

// Time this thread spent in metadata transactions and object store requests, added by the
// engine and store decorators (meta/timed_engine.h, object/timed_store.h); a FUSE request
// takes the difference over its life for the slow-operation log.
struct ThreadTimes {
  int64_t meta_ns = 0, store_ns = 0;
};
ThreadTimes& ThisThread();

// A collector of the process's CPU time, resident memory, threads and open descriptors
// (from /proc/self).
Collector ProcessCollector();

// Renders "name{a="x",b="y"}" with label values escaped as the format requires.
std::string SeriesName(const std::string& name, const Labels& labels);

}  // namespace tierfs::metrics
