// The libfuse3 low-level adapter: mounts the volume and translates kernel requests into
// Vfs calls. Status codes become reply errnos here and nowhere else.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs {

class Vfs;

struct FuseOptions {
  std::string mountpoint;
  std::string fsname = "tierfs";
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
  double dir_entry_timeout = 1.0;
  std::vector<std::string> mount_options;  // -o values: allow_other, default_permissions, ro, ...
  int max_threads = 16;
  // `mount --subdir`: the inode the kernel sees as the mount's root (FUSE_ROOT_ID); the
  // volume's root otherwise. Nothing above it can be reached through the mount.
  uint64_t root = 1;
  // Requests slower than this are logged with their path and the time they spent in
  // metadata and object store requests (`mount --slow-op`); 0: none.
  int64_t slow_op_ns = 1'000'000'000;
  // Drop the kernel's cached attributes and names as other clients change them, when the
  // metadata engine pushes changes (fuse/remote_invalidation.h; `mount --no-meta-watch`).
  bool meta_watch = true;
  // FUSE passthrough for files with a verified flat copy (Vfs::EnableFlatCopies), where the
  // kernel offers it (fuse/kernel_passthrough.h; `mount --no-passthrough`).
  bool passthrough = true;
  // FUSE over io_uring where the kernel offers it (fuse/uring_queues.h; `mount --io-uring`),
  // with io_uring_threads threads of io_uring_depth entries each per queue.
  bool io_uring = false;
  int io_uring_threads = 2;
  int io_uring_depth = 8;
};

// Mounts, calls on_ready once the kernel mount exists, and serves requests until the file
// system is unmounted or the process gets SIGINT/SIGTERM/SIGHUP. on_ready gets the error
// when mounting fails.
Status RunFuse(Vfs* vfs, const FuseOptions& opts, const std::function<void(const Status&)>& on_ready);

}  // namespace tierfs
