// The folders of a disk cache directory (`mount --cache-dir`): one per volume, CACHE-DIR/UUID
// (chunk/cache_dir.h), holding that volume's cached blocks and, under staging/, the blocks a
// --writeback client wrote and has not uploaded yet (chunk/staging.h).
//
// A mount knows only its own volume: a cache directory shared by volumes of several metadata
// engines holds folders no single client can tell the fate of. So nothing here decides that a
// volume is gone; callers report folders and remove the ones a user or `tierfs destroy` names,
// or that nobody used for a long time. Whatever the caller asks, RemoveCacheFolder removes a
// folder only when
//   - its name is a UUID and it holds what TierFS makes there (index, blocks, lock, staging);
//   - no process uses it: the cache's lock and the staging area's lock are both free, and
//     both stay held by the remover until the folder is renamed away, so no mount can start
//     using it meanwhile (a mount starting then fails with "in use" or makes a new folder);
//   - its staging area holds nothing but its lock: staged blocks are written data that is
//     not in the object store yet, never cache, and are never removed here.
// The folder is renamed to a hidden name first, then deleted, so that a mount of the volume
// starting while it goes gets a fresh folder rather than half of the old one.
//
// Pure file operations; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs {

struct CacheFolder {
  std::string dir;             // the cache directory
  std::string uuid;            // the volume's UUID: the folder is dir/uuid
  int64_t last_used_ns = 0;    // newest change of the folder, its index, lock or clean file (a
                               // mount's start and end, blocks cached or evicted), staging
  uint64_t bytes = 0;          // what its files hold, when measured
  uint64_t staged_files = 0;   // entries of staging/ other than its lock (never removed)
  bool in_use = false;         // a process holds its cache or staging lock (read from
                               // /proc/locks: listing takes no lock a mount could run into)
  std::string path() const { return dir + "/" + uuid; }
};

// The volume folders of each directory (a missing directory has none), in name order.
// `measure`: walk each folder for its size (costs a stat per file).
std::vector<CacheFolder> ListCacheFolders(const std::vector<std::string>& dirs, bool measure);

// Removes dir/uuid under the rules above. ENOENT: no such folder; EINVAL: not a TierFS
// volume folder; EBUSY: in use; ENOTEMPTY: its staging area holds written data; other
// errors from the file system. The message says which, and what to do.
Status RemoveCacheFolder(const std::string& dir, const std::string& uuid);

// Whether name has the form of a volume UUID (8-4-4-4-12 hex digits).
bool IsVolumeUuid(const std::string& name);

}  // namespace tierfs
