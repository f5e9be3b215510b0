// What every request costs: counts, latency histograms (metrics), and the log line of a
// slow request with its path and where the time went (metadata, object store).
#include <spdlog/spdlog.h>

#include "fuse/fuse_internal.h"
#include "meta/meta.h"
#include "metrics/metrics.h"
#include "vfs/vfs.h"

namespace tierfs::fuse_internal {

namespace {

metrics::Histogram* const* OpHistograms() {
  static metrics::Histogram* const* h = [] {
    static metrics::Histogram* all[kOpCount];
    for (int i = 0; i < kOpCount; ++i) {
      all[i] = &metrics::Default().GetHistogram(
          "tierfs_fuse_op_duration_seconds", "FUSE requests by operation: latency (its count is the number of requests)",
          {{"op", kOpNames[i]}});
    }
    return all;
  }();
  return h;
}

}  // namespace

OpTimer::OpTimer(Op op) : op_(op), start_(std::chrono::steady_clock::now()) {}

OpTimer::OpTimer(Op op, fuse_req_t req, uint64_t kernel_ino, const char* name)
    : op_(op), start_(std::chrono::steady_clock::now()) {
  slow_ns_ = O(req).slow_op_ns;
  if (slow_ns_ <= 0) return;
  vfs_ = V(req);
  ino_ = In(req, kernel_ino);
  name_ = name;
  const auto& t = metrics::ThisThread();
  meta_ns0_ = t.meta_ns;
  store_ns0_ = t.store_ns;
}

OpTimer::~OpTimer() {
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  g_op_count[op_].fetch_add(1, std::memory_order_relaxed);
  g_op_ns[op_].fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  OpHistograms()[op_]->ObserveNs(ns);
  if (!vfs_ || ns < slow_ns_) return;
  const auto& t = metrics::ThisThread();
  auto path = vfs_->meta()->PathOf(ino_);
  std::string where = path.ok() ? *path : "<inode " + std::to_string(ino_) + ">";
  if (name_) where += (where == "/" ? "" : "/") + std::string(name_);
  spdlog::warn("slow request: {} {} (inode {}) took {:.3f} s: {:.3f} s in metadata transactions, {:.3f} s in "
               "object store requests",
               kOpNames[op_], where, ino_, static_cast<double>(ns) / 1e9,
               static_cast<double>(t.meta_ns - meta_ns0_) / 1e9, static_cast<double>(t.store_ns - store_ns0_) / 1e9);
}

}  // namespace tierfs::fuse_internal
