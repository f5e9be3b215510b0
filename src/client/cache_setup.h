// The cache options a mount and a cache server share (--cache-dir, --cache-size,
// --free-space-ratio, --mem-cache-size, --cache-writes), how they become a StoreConfig,
// and how long either waits for the object store (--io-timeout).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs {
class CachedStore;
class FlatFiles;
struct FormatRecord;
struct StoreConfig;
}  // namespace tierfs

namespace tierfs::client {

struct CacheArgs {
  std::string cache_dir;            // empty: DefaultCacheDir(); "memory": no disk cache
  std::string cache_size = "100G";  // disk cache capacity
  double free_space_ratio = 0.1;
  std::string mem_cache_size;  // empty: DefaultMemCache()
  bool cache_writes = false;
  // Seconds a request may wait for the object store, retries included (StorageSpec::
  // io_timeout_s); then it fails with EIO.
  int io_timeout = 60;
};

// Resolves relative cache directories against the current directory (a background
// process works from "/").
void MakeCacheDirsAbsolute(CacheArgs* args);
// Sets cfg's memory cache, disk cache and cache_writes_to_disk; EINVAL names a bad option.
Status ApplyCacheOptions(const CacheArgs& args, const FormatRecord& fmt, StoreConfig* cfg);
// Where `--writeback` stages blocks: FIRST-CACHE-DIR/VOLUME-UUID/staging (EINVAL with
// --cache-dir memory: write-back needs a disk).
Result<std::string> StagingDirFor(const CacheArgs& args, const FormatRecord& fmt);
// `tierfs gc --cache` removes folders of other volumes unused for this many days (by
// default); a mount reports them from this age on.
constexpr int64_t kUnusedCacheDays = 30;
constexpr int64_t kDayNs = 86400LL * 1000000000;

// Logs what the disk cache holds at start, or warns that no directory is usable, and the
// folders of other volumes in its directories (chunk/cache_folders.h): a mount cannot know
// whether their volumes exist, so it only reports them.
// DIR/VOLUME-UUID/staging for every cache directory (none with --cache-dir memory): where
// a write-back client with these options may have left staged blocks.
std::vector<std::string> StagingDirsFor(const CacheArgs& args, const FormatRecord& fmt);
// Logs what the disk cache holds at start, or warns that no directory is usable.
void LogCacheState(CachedStore* store, const StoreConfig& cfg);
// The whole-file copies FUSE passthrough reads (chunk/flat_files.h), in the first cache
// directory, taking `size` bytes ("": a quarter of --cache-size). Null, with the reason
// logged, without a disk cache or when the folder cannot be used; EINVAL for a bad size.
Result<std::unique_ptr<FlatFiles>> OpenFlatCopies(CachedStore* store, const CacheArgs& args, const std::string& size);
// The default cache directory (--cache-dir): /var/cache/tierfs for root, ~/.cache/tierfs else.
std::string DefaultCacheDir();
// --cache-dir's list of directories (DIR[:DIR...]).
std::vector<std::string> SplitDirs(const std::string& dirs);

}  // namespace tierfs::client
