#include "chunk/disk_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "common/hash.h"
#include "common/thread_pool.h"

namespace tierfs {

uint64_t FillQueueLimit(const DiskCacheOptions& o, double bytes_per_s) {
  if (bytes_per_s <= 0) return o.initial_pending_bytes;
  double want = bytes_per_s * o.queue_seconds;
  if (want < static_cast<double>(o.min_pending_bytes)) return o.min_pending_bytes;
  if (want > static_cast<double>(o.max_pending_bytes)) return o.max_pending_bytes;
  return static_cast<uint64_t>(want);
}

DiskCache::DiskCache(DiskCacheOptions opts) : opts_(std::move(opts)), limit_(FillQueueLimit(opts_, 0)) {
  if (!opts_.dirs.empty()) {
    uint64_t each = opts_.capacity / opts_.dirs.size();
    for (const std::string& d : opts_.dirs) {
      auto dir = CacheDir::Open(d, opts_.volume_uuid, each, opts_.free_space_ratio, opts_.correlated_ms);
      if (!dir.ok()) {
        spdlog::error("disk cache directory {} not used: {}", d, dir.status().ToString());
        continue;
      }
      dirs_.push_back(std::move(dir).value());
    }
  }
  if (!dirs_.empty()) {
    int n = std::max(1, opts_.write_threads);
    writers_ = std::make_unique<ThreadPool>("tierfs-cachewr", n, 1 << 16);
  }
}

DiskCache::~DiskCache() {
  Drain();
  writers_.reset();
}

CacheDir* DiskCache::DirFor(uint64_t fp) const {
  if (dirs_.empty()) return nullptr;
  // The fingerprint's low byte names the file's subfolder; mix in the high bits here.
  CacheDir* d = dirs_[(fp >> 32) % dirs_.size()].get();
  return d->down() ? nullptr : d;
}

bool DiskCache::Contains(const std::string& key) const {
  uint64_t fp = Hash64(key);
  CacheDir* d = DirFor(fp);
  return d && d->Contains(fp);
}

bool DiskCache::Read(const std::string& key, uint32_t block_len, uint32_t off, uint32_t len, char* dst) {
  uint64_t fp = Hash64(key);
  CacheDir* d = DirFor(fp);
  return d && d->Read(fp, key, block_len, off, len, dst);
}

std::shared_ptr<const std::string> DiskCache::ReadBlock(const std::string& key, uint32_t block_len,
                                                      BufferPool* pool) {
  uint64_t fp = Hash64(key);
  CacheDir* d = DirFor(fp);
  return d ? d->ReadBlock(fp, key, block_len, pool) : nullptr;
}

void DiskCache::WriteMeasured(CacheDir* d, uint64_t fp, const std::string& key, const std::string& block,
                              const std::vector<uint32_t>* sums) {
  int64_t t0 = MonoNanos();
  bool wrote = d->Write(fp, key, block, sums);
  int64_t ns = MonoNanos() - t0;
  std::lock_guard<std::mutex> l(pending_mu_);
  pending_fps_.erase(fp);
  if (wrote && ns > 0) {
    // One write's speed times the writer threads: what the disks take when all write.
    double bps = static_cast<double>(block.size()) * 1e9 / static_cast<double>(ns) *
                 static_cast<double>(std::max(1, opts_.write_threads));
    write_bps_ = write_bps_ == 0 ? bps : write_bps_ * 0.9 + bps * 0.1;
    limit_ = FillQueueLimit(opts_, write_bps_);
  }
  pending_cv_.notify_all();
}

void DiskCache::Put(const std::string& key, std::shared_ptr<const std::string> block, std::vector<uint32_t> sums) {
  if (!block || dirs_.empty()) return;
  uint64_t fp = Hash64(key);
  CacheDir* d = DirFor(fp);
  if (!d || d->Contains(fp)) return;
  uint64_t bytes = block->size();
  {
    std::lock_guard<std::mutex> l(pending_mu_);
    if (pending_fps_.count(fp)) return;  // already on its way
    if (pending_bytes_ + bytes > limit_ && pending_writes_ > 0) {
      dropped_writes_++;
      return;
    }
    pending_bytes_ += bytes;
    ++pending_writes_;
    pending_fps_.insert(fp);
  }
  bool queued = writers_->TrySubmit([this, d, fp, key, block = std::move(block), bytes, sums = std::move(sums)] {
    WriteMeasured(d, fp, key, *block, &sums);
    {
      std::lock_guard<std::mutex> l(pending_mu_);
      pending_bytes_ -= bytes;
      --pending_writes_;
    }
    pending_cv_.notify_all();
  });
  if (!queued) {
    std::lock_guard<std::mutex> l(pending_mu_);
    pending_bytes_ -= bytes;
    --pending_writes_;
    pending_fps_.erase(fp);
    dropped_writes_++;
  }
}

void DiskCache::PutNow(const std::string& key, const std::shared_ptr<const std::string>& block) {
  if (!block) return;
  uint64_t fp = Hash64(key);
  CacheDir* d = DirFor(fp);
  if (!d) return;
  {
    std::unique_lock<std::mutex> l(pending_mu_);
    pending_cv_.wait(l, [&] { return pending_fps_.count(fp) == 0; });
    if (d->Contains(fp)) return;
    pending_fps_.insert(fp);
  }
  WriteMeasured(d, fp, key, *block);
}

void DiskCache::Erase(const std::string& key) {
  uint64_t fp = Hash64(key);
  if (dirs_.empty()) return;
  dirs_[(fp >> 32) % dirs_.size()]->Erase(fp);
}

void DiskCache::Drain() {
  std::unique_lock<std::mutex> l(pending_mu_);
  pending_cv_.wait(l, [&] { return pending_writes_ == 0; });
}

DiskCacheStats DiskCache::stats() const {
  DiskCacheStats s;
  s.dropped_writes = dropped_writes_;
  {
    std::lock_guard<std::mutex> l(pending_mu_);
    s.queue_limit = limit_;
    s.write_bytes_per_s = static_cast<uint64_t>(write_bps_);
  }
  s.dirs = static_cast<int>(dirs_.size());
  for (const auto& d : dirs_) {
    CacheDirStats ds = d->stats();
    s.hits += ds.hits;
    s.misses += ds.misses;
    s.evictions += ds.evictions;
    s.writes += ds.writes;
    s.corrupt += ds.corrupt;
    s.errors += ds.errors;
    s.bytes += ds.bytes;
    s.blocks += ds.blocks;
    s.capacity += ds.capacity;
    if (ds.down) ++s.dirs_down;
  }
  return s;
}

std::vector<std::string> DiskCache::roots() const {
  std::vector<std::string> out;
  for (const auto& d : dirs_) out.push_back(d->root());
  return out;
}

}  // namespace tierfs
