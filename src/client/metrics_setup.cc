#include "client/metrics_setup.h"


#include <iostream>

#include "chunk/block_cache.h"
#include "chunk/cached_store.h"
#include "metrics/metrics.h"

namespace tierfs::client {
namespace {

using metrics::CollectedFamily;
using metrics::Labels;

void Add(std::vector<CollectedFamily>* out, const std::string& name, const std::string& help, const char* type,
         const Labels& labels, double v) {
  for (auto& f : *out) {
    if (f.name == name) {
      f.samples.push_back({name, labels, v});
      return;
    }
  }
  out->push_back({name, help, type, {{name, labels, v}}});
}

// The cache levels, the write buffer and the group, from the store's counters.
metrics::Collector StoreCollector(CachedStore* cs) {
  return [cs](std::vector<CollectedFamily>* out) {
    StoreStats s = cs->stats();
    const DiskCacheStats& d = s.disk;
    struct Level {
      const char* name;
      uint64_t hits, misses, evictions, bytes, blocks, capacity;
    };
    for (const Level& l : {Level{"memory", s.cache_hits, s.cache_misses, s.evictions, s.cache_bytes, s.cache_blocks,
                                 cs->cache()->capacity()},
                           Level{"disk", d.hits, d.misses, d.evictions, d.bytes, d.blocks, d.capacity}}) {
      Labels lv = {{"level", l.name}};
      Add(out, "tierfs_cache_hits_total", "Block reads served by a cache level", "counter", lv, double(l.hits));
      Add(out, "tierfs_cache_misses_total", "Block reads a cache level did not have", "counter", lv, double(l.misses));
      Add(out, "tierfs_cache_evictions_total", "Blocks evicted from a cache level", "counter", lv, double(l.evictions));
      Add(out, "tierfs_cache_bytes", "Bytes held by a cache level", "gauge", lv, double(l.bytes));
      Add(out, "tierfs_cache_blocks", "Blocks held by a cache level", "gauge", lv, double(l.blocks));
      Add(out, "tierfs_cache_capacity_bytes", "Capacity of a cache level", "gauge", lv, double(l.capacity));
    }
    Labels group = {{"level", "group"}};
    Add(out, "tierfs_cache_hits_total", "Block reads served by a cache level", "counter", group, double(s.peer_hits));
    Add(out, "tierfs_cache_misses_total", "Block reads a cache level did not have", "counter", group,
        double(s.peer_failures));
    Add(out, "tierfs_disk_cache_errors_total", "Disk cache read or write errors (the disk is then skipped)", "counter",
        {}, double(d.errors));
    Add(out, "tierfs_disk_cache_corrupt_total", "Disk cache blocks that failed their checksum (dropped)", "counter", {},
        double(d.corrupt));
    Add(out, "tierfs_disk_cache_dirs_down", "Disk cache directories out of use", "gauge", {}, double(d.dirs_down));
    Add(out, "tierfs_disk_cache_dropped_fills_total",
        "Blocks read from the store that were not written to the disk cache: its fill queue was full (the disk "
        "is slower than the reads)",
        "counter", {}, double(d.dropped_writes));
    Add(out, "tierfs_disk_cache_fill_queue_limit_bytes",
        "Limit of the disk cache's fill queue (2 s of its measured write speed, 32 MiB to 256 MiB)", "gauge", {},
        double(d.queue_limit));
    Add(out, "tierfs_disk_cache_write_bytes_per_second", "Measured write speed of the disk cache (0: not yet)",
        "gauge", {}, double(d.write_bytes_per_s));
    Add(out, "tierfs_write_buffer_bytes", "Written data buffered in memory, not yet uploaded", "gauge", {},
        double(s.buffered_bytes));
    Add(out, "tierfs_uploads_in_flight", "Block uploads queued or running", "gauge", {}, double(s.uploads_in_flight));
    Add(out, "tierfs_upload_failures_total", "Blocks whose upload failed after every retry", "counter", {},
        double(s.upload_failures));
    Add(out, "tierfs_staged_bytes", "Write-back: bytes staged on local disk, not yet uploaded", "gauge", {},
        double(s.staged_bytes));
    Add(out, "tierfs_group_served_bytes_total", "Bytes this member served to its cache group", "counter", {},
        double(s.peer_served_bytes));
  };
}

}  // namespace

Result<std::unique_ptr<metrics::Exporter>> StartMetrics(const std::string& addr, const std::string& volume,
                                                         const std::string& mountpoint, CachedStore* store) {
  auto& r = metrics::Default();
  r.SetConstLabels({{"volume", volume}, {"mountpoint", mountpoint}});
  r.AddCollector(metrics::ProcessCollector());
  if (store) r.AddCollector(StoreCollector(store));
  // Without an address the registry still answers tierfs.stats (`tierfs stats`).
  return metrics::Exporter::Start(addr, &r);
}

Result<std::unique_ptr<metrics::Exporter>> StartCommandMetrics(const std::string& addr, const std::string& volume,
                                                                const std::string& command) {
  ASSIGN_OR_RETURN(auto exporter, StartMetrics(addr, volume, command, nullptr));
  if (exporter) std::cerr << "tierfs " << command << ": metrics on http://" << exporter->address() << "/metrics" << std::endl;
  return exporter;
}

}  // namespace tierfs::client
