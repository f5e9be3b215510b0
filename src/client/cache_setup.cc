#include "client/cache_setup.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "chunk/cache_folders.h"
#include "chunk/cached_store.h"
#include "chunk/flat_files.h"
#include "client/open.h"
#include "common/clock.h"
#include "common/size.h"
#include "meta/meta.h"

namespace tierfs::client {
namespace {

// The memory block cache: 2% of RAM, between 256 MiB and 16 GiB (a GPU node with 1 TiB of
// RAM gets 16 GiB; this 24 GiB machine about 490 MiB). The kernel's page cache holds what
// was read recently on top of it; this cache holds prefetched blocks and small files.
uint64_t DefaultMemCache() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 8ull << 30;
  return std::clamp<uint64_t>(ram / 50, 256ull << 20, 16ull << 30);
}

std::string DescribeFolder(const CacheFolder& f, int64_t now_ns) {
  if (f.in_use) return f.uuid + " (in use)";
  if (f.staged_files > 0) return f.uuid + " (holds staged writes)";
  return f.uuid + " (unused for " + std::to_string((now_ns - f.last_used_ns) / kDayNs) + " days)";
}

void ReportOtherVolumeFolders(const std::vector<std::string>& dirs, const std::string& own_uuid) {
  const int64_t now = NowNanos();
  for (const std::string& dir : dirs) {
    std::vector<CacheFolder> others;
    size_t stale = 0;
    for (CacheFolder& f : ListCacheFolders({dir}, false)) {
      if (f.uuid == own_uuid) continue;
      if (!f.in_use && f.staged_files == 0 && now - f.last_used_ns >= kUnusedCacheDays * kDayNs) ++stale;
      others.push_back(std::move(f));
    }
    if (others.empty()) continue;
    std::string list;
    for (size_t i = 0; i < others.size() && i < 8; ++i) list += (i ? ", " : "") + DescribeFolder(others[i], now);
    if (others.size() > 8) list += ", ...";
    spdlog::info("disk cache directory {} also holds the folders of {} other volumes: {}", dir, others.size(), list);
    if (stale > 0) {
      spdlog::warn("disk cache directory {}: {} folders of other volumes were unused for {} days or more; this "
                   "mount cannot tell whether their volumes still exist (another metadata engine may hold them): "
                   "`tierfs gc --cache --cache-dir {}` lists them, and with --delete removes those unused for {} "
                   "days (never staged writes)",
                   dir, stale, kUnusedCacheDays, dir, kUnusedCacheDays);
    }
  }
}

}  // namespace

std::string DefaultCacheDir() {
  if (geteuid() == 0) return "/var/cache/tierfs";
  const char* home = getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/tierfs";
}

std::vector<std::string> SplitDirs(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t colon = s.find(':', start);
    if (colon == std::string::npos) colon = s.size();
    if (colon > start) out.push_back(AbsPath(s.substr(start, colon - start)));
    start = colon + 1;
  }
  return out;
}

void MakeCacheDirsAbsolute(CacheArgs* a) {
  if (a->cache_dir.empty() || a->cache_dir == "memory") return;
  std::string abs;
  for (const auto& d : SplitDirs(a->cache_dir)) abs += (abs.empty() ? "" : ":") + d;
  a->cache_dir = abs;
}

Status ApplyCacheOptions(const CacheArgs& a, const FormatRecord& fmt, StoreConfig* cfg) {
  if (a.mem_cache_size.empty()) {
    cfg->cache_bytes = DefaultMemCache();
  } else {
    auto mem = ParseSize(a.mem_cache_size);
    if (!mem.ok()) return mem.status().With("--mem-cache-size");
    cfg->cache_bytes = *mem;
  }
  if (a.cache_dir != "memory") {
    auto disk = ParseSize(a.cache_size);
    if (!disk.ok()) return disk.status().With("--cache-size");
    if (a.free_space_ratio < 0 || a.free_space_ratio >= 1) {
      return Status::Err(EINVAL, "--free-space-ratio must be in [0, 1)");
    }
    cfg->disk.dirs = SplitDirs(a.cache_dir.empty() ? DefaultCacheDir() : a.cache_dir);
    if (cfg->disk.dirs.empty()) return Status::Err(EINVAL, "--cache-dir names no directory");
    cfg->disk.volume_uuid = fmt.uuid;
    cfg->disk.capacity = *disk;
    cfg->disk.free_space_ratio = a.free_space_ratio;
    if (*disk == 0) cfg->disk.dirs.clear();
  }
  cfg->cache_writes_to_disk = a.cache_writes;
  return Status::OK();
}

Result<std::string> StagingDirFor(const CacheArgs& a, const FormatRecord& fmt) {
  if (a.cache_dir == "memory") {
    return Status::Err(EINVAL, "--writeback stages written blocks on a local disk: give it a --cache-dir, not 'memory'");
  }
  std::vector<std::string> dirs = SplitDirs(a.cache_dir.empty() ? DefaultCacheDir() : a.cache_dir);
  if (dirs.empty()) return Status::Err(EINVAL, "--cache-dir names no directory");
  return dirs.front() + "/" + fmt.uuid + "/staging";
}

std::vector<std::string> StagingDirsFor(const CacheArgs& a, const FormatRecord& fmt) {
  std::vector<std::string> out;
  if (a.cache_dir == "memory") return out;
  for (const auto& d : SplitDirs(a.cache_dir.empty() ? DefaultCacheDir() : a.cache_dir)) {
    out.push_back(d + "/" + fmt.uuid + "/staging");
  }
  return out;
}

void LogCacheState(CachedStore* store, const StoreConfig& cfg) {
  if (DiskCache* dc = store->disk()) {
    DiskCacheStats ds = dc->stats();
    spdlog::info("disk cache: {} directories, {} blocks ({} bytes) cached, capacity {}", ds.dirs, ds.blocks,
                 ds.bytes, ds.capacity);
  } else if (!cfg.disk.dirs.empty()) {
    spdlog::warn("no usable disk cache directory; reads not in memory go to the object store");
  }
  ReportOtherVolumeFolders(cfg.disk.dirs, cfg.disk.volume_uuid);
}

Result<std::unique_ptr<FlatFiles>> OpenFlatCopies(CachedStore* store, const CacheArgs& args,
                                                  const std::string& size) {
  uint64_t capacity = 0;
  if (!size.empty()) {
    auto n = ParseSize(size);
    if (!n.ok()) return Status::Err(EINVAL, "--passthrough-cache-size: " + n.status().message());
    capacity = *n;
  } else {
    auto n = ParseSize(args.cache_size);
    if (!n.ok()) return Status::Err(EINVAL, "--cache-size: " + n.status().message());
    capacity = *n / 4;
  }
  DiskCache* disk = store->disk();
  if (!disk || disk->roots().empty() || capacity == 0) {
    spdlog::info("FUSE passthrough off: it reads copies kept in the disk cache, and there is none");
    return std::unique_ptr<FlatFiles>();
  }
  auto flat = FlatFiles::Open(disk->roots().front() + "/flat", capacity, args.free_space_ratio);
  if (!flat.ok()) {
    spdlog::warn("FUSE passthrough off: {}", flat.status().message());
    return std::unique_ptr<FlatFiles>();
  }
  return std::move(*flat);
}

}  // namespace tierfs::client
