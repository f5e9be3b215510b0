// The options of `tierfs mount` (also what an fstab line may carry, through mount.tierfs),
// their checks before anything is opened, and the defaults that depend on the volume.
#pragma once

#include <string>
#include <vector>

#include "cmd/client_options.h"
#include "client/group_member.h"
#include "common/status.h"
#include "meta/meta.h"  // AtimeMode

namespace CLI {
class App;
}

namespace tierfs::cmd {

// Everything `tierfs mount` was given.
struct MountArgs {
  std::string meta_url, mountpoint, log_file;
  std::string metrics;  // "": the default address, and no error when it cannot be used
  double slow_op = 1.0;
  bool background = false;
  bool require_safe_meta = false;
  double attr_cache = 1.0, entry_cache = 1.0, dir_entry_cache = 1.0;
  bool no_meta_watch = false;
  bool no_passthrough = false;
  bool io_uring = false;
  int io_uring_threads = 2;
  int io_uring_depth = 8;
  std::string passthrough_min_size = "1M";
  std::string passthrough_cache_size;  // "": a quarter of --cache-size
  std::string buffer_size = "300M";
  client::CacheArgs cache;
  client::GroupArgs group;
  double open_cache = 0;
  int upload_threads = 16, download_threads = 8;
  std::vector<std::string> options;
  bool read_only = false;
  std::string primary;  // --primary: a mirror's writes go to this primary
  bool no_default_permissions = false;
  bool no_sync_blocks = false;
  bool writeback = false;
  double upload_delay = 0;
  std::string pack_below = "1M";
  std::string subdir;
  double backup_meta = 3600;
  int backup_keep = 7;
  double compact_grace = 600;
  int fuse_threads = 0;  // 0: FuseThreadsFor(volume)
  bool update_fstab = false;
  double bucket_free_space = 0.05;
};

// Declares the options on `sub` (META-URL and MOUNTPOINT included), stored into *a.
void AddMountOptions(CLI::App* sub, MountArgs* a);

// Options that contradict each other or do nothing together, and -o options FUSE does not
// know (mount_checks.h).
Status CheckMountArgs(const MountArgs& a, const CLI::App& sub);

// -o noatime, strictatime, relatime (the default) and atime (= relatime, as mount(8)):
// the last one given wins. They also reach the kernel's mount flags.
AtimeMode AtimeModeOf(const std::vector<std::string>& opts);

// FUSE worker threads. On the embedded default (SQLite and a local directory) a handler
// is CPU work that never waits on a network, and workers beyond a couple per CPU only add
// sleeps, wake-ups and lock contention (measured: 16 workers made 4-thread small-file
// creates on 2 CPUs 15% slower than 4). A remote engine or store makes handlers wait on
// round trips, and more workers keep more of them in flight.
int FuseThreadsFor(const std::string& meta_url, const std::string& storage);

}  // namespace tierfs::cmd
