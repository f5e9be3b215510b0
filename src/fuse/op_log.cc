// What every request costs: counts, latency histograms (metrics), and the log line of a
// slow request with its path and where the time went (metadata, object store).
#include <linux/fuse.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <ctime>
#include <mutex>
#include <unordered_map>

#include "fuse/access_log.h"

#include "fuse/fuse_internal.h"
#include "fuse/name_hints.h"
#include "meta/meta.h"
#include "metrics/metrics.h"
#include "vfs/vfs.h"

namespace tierfs::fuse_internal {

namespace {

// Paths for the access log, remembered for a second (every request of a busy file would
// otherwise resolve it again); slow requests always resolve afresh.
std::string PathFor(Vfs* vfs, Ino ino, bool cached) {
  if (ino == kAccessLogIno) return "/.accesslog";  // answered by the adapter, not in the metadata
  static std::mutex mu;
  static std::unordered_map<Ino, std::pair<std::string, int64_t>> cache;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  if (cached) {
    std::lock_guard<std::mutex> l(mu);
    auto it = cache.find(ino);
    if (it != cache.end() && it->second.second > now) return it->second.first;
  }
  // Per level of the path: a remembered name (one read to check it) or a scan of the
  // parent's entries; counted, since the scans are what makes this expensive.
  auto series = [](const char* by) {
    return &metrics::Default().GetCounter(
        "tierfs_path_resolutions_total", "Path levels resolved for the access log and slow-request lines",
        {{"by", by}});
  };
  static metrics::Counter* by_hint = series("name_hint");
  static metrics::Counter* by_scan = series("scan");
  auto path = vfs->meta()->PathOf(ino, kRootIno, [](Ino i, Ino* parent, std::string* name) {
    bool found = FindName(i, parent, name);
    (found ? by_hint : by_scan)->Add();
    return found;
  });
  std::string p = path.ok() ? *path : "<inode " + std::to_string(ino) + ">";
  std::lock_guard<std::mutex> l(mu);
  if (cache.size() > 10000) cache.clear();
  cache[ino] = {p, now + 1'000'000'000};
  return p;
}

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
  const fuse_ctx* c = fuse_req_ctx(req);
  Setup(V(req), O(req), kernel_ino, name, c->uid, c->gid, static_cast<uint32_t>(c->pid));
}

OpTimer::OpTimer(Op op, Ctxt* c, const fuse_in_header& h) : op_(op), start_(std::chrono::steady_clock::now()) {
  Setup(c->vfs, c->opts, h.nodeid, nullptr, h.uid, h.gid, h.pid);
}

void OpTimer::Setup(Vfs* vfs, const FuseOptions& opts, uint64_t kernel_ino, const char* name, uint32_t uid,
                    uint32_t gid, uint32_t pid) {
  ino_ = InoIn(opts.root, kernel_ino);
  name_ = name;
  g_req_parent = ino_;
  g_req_name = name;
  slow_ns_ = opts.slow_op_ns;
  log_ = kernel_ino != kAccessLogIno && AccessLog::Active();
  if (slow_ns_ <= 0 && !log_) return;
  if (slow_ns_ <= 0) slow_ns_ = INT64_MAX;
  vfs_ = vfs;
  g_reply_err = 0;
  if (log_) {
    uid_ = uid;
    gid_ = gid;
    pid_ = pid;
  }
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
  if (!vfs_ || (ns < slow_ns_ && !log_)) return;
  const auto& t = metrics::ThisThread();
  std::string where = PathFor(vfs_, ino_, log_ && ns < slow_ns_);
  if (name_) where += (where == "/" ? "" : "/") + std::string(name_);
  if (log_) {
    // 2026.11.25 20:50:01.123456 [uid:0,gid:0,pid:42] write /a/b (1181,4096,0): OK <0.000123>
    auto now = std::chrono::system_clock::now();
    time_t secs = std::chrono::system_clock::to_time_t(now);
    struct tm tm;
    localtime_r(&secs, &tm);
    char when[64];
    size_t n = strftime(when, sizeof when, "%Y.%m.%d %H:%M:%S", &tm);
    snprintf(when + n, sizeof when - n, ".%06d",
             static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
                              1000000));
    std::string args = "(" + std::to_string(ino_);
    if (has_args_) args += "," + std::to_string(a_) + "," + std::to_string(b_);
    args += ")";
    char tail[96];
    snprintf(tail, sizeof tail, ": %s <%.6f>\n", g_reply_err ? strerror(g_reply_err) : "OK",
             static_cast<double>(ns) / 1e9);
    AccessLog::Add(std::string(when) + " [uid:" + std::to_string(uid_) + ",gid:" + std::to_string(gid_) +
                   ",pid:" + std::to_string(pid_) + "] " + kOpNames[op_] + " " + where + " " + args + tail);
  }
  if (ns < slow_ns_) return;
  spdlog::warn("slow request: {} {} (inode {}) took {:.3f} s: {:.3f} s in metadata transactions, {:.3f} s in "
               "object store requests",
               kOpNames[op_], where, ino_, static_cast<double>(ns) / 1e9,
               static_cast<double>(t.meta_ns - meta_ns0_) / 1e9, static_cast<double>(t.store_ns - store_ns0_) / 1e9);
}

}  // namespace tierfs::fuse_internal
