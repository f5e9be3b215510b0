// tierfs stats MOUNTPOINT [--interval 1] [--count N] [--once --json]: a live view of a mount,
// one line per interval in the spirit of vmstat: FUSE requests, metadata transactions,
// object store requests and bytes, cache hit rates, write buffer and uploads, CPU and memory.
// The mount answers its counters (the metrics registry, metrics/metrics.h) through the
// "tierfs.stats" xattr of its root; rates are differences between two readings.
#include <sys/xattr.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"

namespace tierfs::cmd {
namespace {

using nlohmann::json;

Result<json> Read(const std::string& mp) {
  std::string buf(1 << 16, '\0');
  for (int i = 0; i < 4; ++i) {
    ssize_t n = getxattr(mp.c_str(), "tierfs.stats", buf.data(), buf.size());
    if (n >= 0) {
      auto j = json::parse(buf.substr(0, static_cast<size_t>(n)), nullptr, false);
      if (j.is_discarded() || !j.contains("metrics")) {
        return Status::Err(EIO, mp + ": the mount's statistics are not readable (an older tierfs?)");
      }
      return j["metrics"];
    }
    if (errno != ERANGE) {
      return Status::Err(errno, mp + " is not the root of a TierFS mount (" + strerror(errno) + ")");
    }
    buf.resize(buf.size() * 4);
  }
  return Status::Err(E2BIG, "the mount's statistics are too large");
}

// Sum of the series of one family whose labels contain `filter` (e.g. "kind=\"get\"").
double Sum(const json& m, const std::string& family, const std::string& filter = "") {
  double total = 0;
  for (auto it = m.begin(); it != m.end(); ++it) {
    const std::string& k = it.key();
    if (k.compare(0, family.size(), family) != 0) continue;
    if (k.size() > family.size() && k[family.size()] != '{') continue;
    if (!filter.empty() && k.find(filter) == std::string::npos) continue;
    if (it->is_number()) total += it->get<double>();
  }
  return total;
}

struct View {
  double fuse_ops, fuse_s, meta_txns, meta_s, meta_retries, gets, puts, store_s, down, up, store_errors;
  double mem_hits, mem_misses, disk_hits, disk_misses, group_hits, buffer, uploads, cpu, rss, staged, dropped;
};

View Take(const json& m) {
  View v{};
  v.fuse_ops = Sum(m, "tierfs_fuse_op_duration_seconds_count");
  v.fuse_s = Sum(m, "tierfs_fuse_op_duration_seconds_sum");
  v.meta_txns = Sum(m, "tierfs_meta_txn_duration_seconds_count");
  v.meta_s = Sum(m, "tierfs_meta_txn_duration_seconds_sum");
  v.meta_retries = Sum(m, "tierfs_meta_txn_retries_total");
  v.gets = Sum(m, "tierfs_object_request_duration_seconds_count", "kind=\"get\"");
  v.puts = Sum(m, "tierfs_object_request_duration_seconds_count", "kind=\"put\"") +
           Sum(m, "tierfs_object_request_duration_seconds_count", "kind=\"multipart\"");
  v.store_s = Sum(m, "tierfs_object_request_duration_seconds_sum");
  v.down = Sum(m, "tierfs_object_bytes_total", "download");
  v.up = Sum(m, "tierfs_object_bytes_total", "upload");
  v.store_errors = Sum(m, "tierfs_object_request_errors_total");
  v.mem_hits = Sum(m, "tierfs_cache_hits_total", "memory");
  v.mem_misses = Sum(m, "tierfs_cache_misses_total", "memory");
  v.disk_hits = Sum(m, "tierfs_cache_hits_total", "disk");
  v.disk_misses = Sum(m, "tierfs_cache_misses_total", "disk");
  v.group_hits = Sum(m, "tierfs_cache_hits_total", "group");
  v.dropped = Sum(m, "tierfs_disk_cache_dropped_fills_total");
  v.buffer = Sum(m, "tierfs_write_buffer_bytes");
  v.uploads = Sum(m, "tierfs_uploads_in_flight");
  v.staged = Sum(m, "tierfs_staged_bytes");
  v.cpu = Sum(m, "process_cpu_seconds_total");
  v.rss = Sum(m, "process_resident_memory_bytes");
  return v;
}

double Pct(double hits, double misses) { return hits + misses > 0 ? 100.0 * hits / (hits + misses) : 0; }
double Ms(double seconds, double n) { return n > 0 ? seconds * 1000 / n : 0; }

json Rates(const View& a, const View& b, double dt) {
  auto per = [&](double x, double y) { return (y - x) / dt; };
  return {{"fuse", {{"ops_per_s", per(a.fuse_ops, b.fuse_ops)}, {"avg_ms", Ms(b.fuse_s - a.fuse_s, b.fuse_ops - a.fuse_ops)}}},
          {"meta",
           {{"txns_per_s", per(a.meta_txns, b.meta_txns)},
            {"avg_ms", Ms(b.meta_s - a.meta_s, b.meta_txns - a.meta_txns)},
            {"retries_per_s", per(a.meta_retries, b.meta_retries)}}},
          {"store",
           {{"gets_per_s", per(a.gets, b.gets)},
            {"puts_per_s", per(a.puts, b.puts)},
            {"download_bytes_per_s", per(a.down, b.down)},
            {"upload_bytes_per_s", per(a.up, b.up)},
            {"avg_ms", Ms(b.store_s - a.store_s, (b.gets + b.puts) - (a.gets + a.puts))},
            {"errors_per_s", per(a.store_errors, b.store_errors)}}},
          {"cache",
           {{"memory_hit_pct", Pct(b.mem_hits - a.mem_hits, b.mem_misses - a.mem_misses)},
            {"disk_hit_pct", Pct(b.disk_hits - a.disk_hits, b.disk_misses - a.disk_misses)},
            {"group_hits_per_s", per(a.group_hits, b.group_hits)},
            {"disk_dropped_fills_per_s", per(a.dropped, b.dropped)}}},
          {"buffer", {{"bytes", b.buffer}, {"uploads_in_flight", b.uploads}, {"staged_bytes", b.staged}}},
          {"process", {{"cpu_pct", per(a.cpu, b.cpu) * 100}, {"rss_bytes", b.rss}}}};
}

std::string Short(double bytes) { return FormatSize(static_cast<uint64_t>(std::max(0.0, bytes))); }

void PrintHeader() {
  std::printf("%9s %7s | %8s %7s %6s | %6s %6s %9s %9s %7s | %5s %5s %6s | %9s %5s | %5s %9s\n", "fuse/s",
              "avg-ms", "txn/s", "avg-ms", "retry", "get/s", "put/s", "down/s", "up/s", "avg-ms", "mem%", "disk%",
              "drop/s", "buffer", "upl", "cpu%", "rss");
}

void PrintLine(const json& r) {
  std::printf("%9.0f %7.2f | %8.0f %7.2f %6.0f | %6.0f %6.0f %9s %9s %7.2f | %5.0f %5.0f %6.0f | %9s %5.0f | %5.0f %9s\n",
              r["fuse"]["ops_per_s"].get<double>(), r["fuse"]["avg_ms"].get<double>(),
              r["meta"]["txns_per_s"].get<double>(), r["meta"]["avg_ms"].get<double>(),
              r["meta"]["retries_per_s"].get<double>(), r["store"]["gets_per_s"].get<double>(),
              r["store"]["puts_per_s"].get<double>(), Short(r["store"]["download_bytes_per_s"]).c_str(),
              Short(r["store"]["upload_bytes_per_s"]).c_str(), r["store"]["avg_ms"].get<double>(),
              r["cache"]["memory_hit_pct"].get<double>(), r["cache"]["disk_hit_pct"].get<double>(),
              r["cache"]["disk_dropped_fills_per_s"].get<double>(), Short(r["buffer"]["bytes"]).c_str(), r["buffer"]["uploads_in_flight"].get<double>(),
              r["process"]["cpu_pct"].get<double>(), Short(r["process"]["rss_bytes"]).c_str());
  std::fflush(stdout);
}

int Run(const std::string& mp, double interval, int count, bool once, bool as_json) {
  if (interval <= 0) return Fail("stats", Status::Err(EINVAL, "--interval must be positive"));
  auto first = Read(mp);
  if (!first.ok()) return Fail("stats", first.status());
  View prev = Take(*first);
  auto t0 = std::chrono::steady_clock::now();
  if (once) count = 1;
  bool header_due = !as_json;
  for (int i = 0; count <= 0 || i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    auto cur = Read(mp);
    if (!cur.ok()) return Fail("stats", cur.status());
    auto t1 = std::chrono::steady_clock::now();
    View now = Take(*cur);
    json r = Rates(prev, now, std::chrono::duration<double>(t1 - t0).count());
    if (as_json) {
      r["totals"] = {{"fuse_ops", now.fuse_ops},         {"meta_txns", now.meta_txns},
                     {"meta_retries", now.meta_retries}, {"store_gets", now.gets},
                     {"store_puts", now.puts},           {"download_bytes", now.down},
                     {"upload_bytes", now.up},           {"store_errors", now.store_errors},
                     {"disk_dropped_fills", now.dropped}};
      r["interval_s"] = std::chrono::duration<double>(t1 - t0).count();
      std::cout << r.dump() << std::endl;
    } else {
      if (header_due || (i % 20 == 0 && i > 0)) PrintHeader();
      header_due = false;
      PrintLine(r);
    }
    prev = now;
    t0 = t1;
  }
  return 0;
}

}  // namespace

void RegisterStats(CLI::App& app, int* exit_code) {
  struct A {
    std::string mp;
    double interval = 1;
    int count = 0;
    bool once = false, json = false;
  };
  auto a = std::make_shared<A>();
  auto* sub = app.add_subcommand("stats", "Live view of a mount: requests, metadata, object store, cache, buffer");
  sub->add_option("MOUNTPOINT", a->mp, "The root of a TierFS mount")->required();
  sub->add_option("--interval", a->interval, "Seconds between lines")->capture_default_str();
  sub->add_option("--count", a->count, "Lines to print (0: until interrupted)")->capture_default_str();
  sub->add_flag("--once", a->once, "One reading over one interval, then exit");
  sub->add_flag("--json", a->json, "One JSON object per interval: rates per second and totals");
  sub->callback([a, exit_code] { *exit_code = Run(a->mp, a->interval, a->count, a->once, a->json); });
}

}  // namespace tierfs::cmd
