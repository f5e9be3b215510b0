#include "cmd/mount_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <thread>

#include "cmd/mount_checks.h"
#include "common/size.h"
#include "common/url.h"

namespace tierfs::cmd {

void AddMountOptions(CLI::App* sub, MountArgs* a) {
  sub->add_option("META-URL", a->meta_url, "Metadata engine of the volume, e.g. sqlite3:///var/lib/tierfs/vol.db")
      ->required();
  sub->add_option("MOUNTPOINT", a->mountpoint,
                  "Existing directory to mount on (an empty one: the mount hides what it holds)")
      ->required();
  sub->add_flag("-d,--background", a->background, "Run in the background; return once the mount is ready");
  sub->add_option("--log", a->log_file, "Log file (background default: /var/log/tierfs.log)");
  sub->add_option("--attr-cache", a->attr_cache, "Kernel attribute cache timeout, seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_option("--entry-cache", a->entry_cache, "Kernel file entry cache timeout, seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_option("--dir-entry-cache", a->dir_entry_cache, "Kernel directory entry cache timeout, seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_flag("--no-meta-watch", a->no_meta_watch,
                "Do not drop the kernel's cached attributes and names as other clients change them (etcd and "
                "Redis push changes; SQLite and PostgreSQL volumes with a change log are polled every 100 ms; "
                "others rely on the timeouts above alone)");
  sub->add_flag("--no-passthrough", a->no_passthrough,
                "Never let the kernel read cached files directly (FUSE passthrough, Linux 6.9+): by default a "
                "file whose blocks are all in the disk cache gets a verified whole-file copy there, and later "
                "read-only opens read it at the disk's speed; while such an open lasts, the file cannot be "
                "opened for writing on this host (ETXTBSY)");
  sub->add_flag("--io-uring", a->io_uring,
                "Take FUSE requests through io_uring queues, one per CPU, instead of reading /dev/fuse (Linux "
                "6.14+ with /sys/module/fuse/parameters/enable_uring set to Y; falls back to /dev/fuse, with a "
                "log line, elsewhere); see docs/benchmarks.md for where it helps");
  sub->add_option("--io-uring-threads", a->io_uring_threads,
                  "Threads serving each io_uring queue (each with its own ring): while one waits, another "
                  "takes the queue's next request")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  sub->add_option("--io-uring-depth", a->io_uring_depth, "Requests each io_uring thread holds at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 128));
  sub->add_option("--passthrough-min-size", a->passthrough_min_size,
                  "Smallest file given a passthrough copy")
      ->capture_default_str();
  sub->add_option("--passthrough-cache-size", a->passthrough_cache_size,
                  "Disk space for passthrough copies, beside the block cache (default: a quarter of --cache-size)");
  sub->add_option("--buffer-size", a->buffer_size,
                  "Memory for data in flight: 1/2 for written data awaiting upload, 1/2 for prefetches and "
                  "recycled buffers")
      ->capture_default_str();
  AddCacheOptions(sub, &a->cache);
  sub->add_option("--open-cache", a->open_cache,
                  "Seconds a read-only open reuses attributes and slice maps this client read, without "
                  "asking the metadata engine (other clients' changes show after at most this long)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_option("--upload-threads", a->upload_threads, "Concurrent block uploads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--download-threads", a->download_threads, "Concurrent block downloads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--fuse-threads", a->fuse_threads,
                  "FUSE worker threads (default: 2 per CPU, at least 4, with SQLite and a local bucket; 16 otherwise)")
      ->check(CLI::Range(1, 1024));
  AddGroupOptions(sub, &a->group);
  sub->add_option("-o", a->options, "FUSE mount options: allow_other, default_permissions, ro, ...");
  sub->add_flag("--read-only", a->read_only, "Mount read-only");
  sub->add_flag("--require-safe-meta", a->require_safe_meta,
                "Refuse to mount unless the metadata engine's servers keep every acknowledged commit through "
                "one server's loss (tierfs status shows what they say)");
  sub->add_option("--primary", a->primary,
                  "A mirror volume only: write through the primary at this META-URL (its metadata engine and object "
                  "store); reads stay on the mirror, and this mount sees its own writes at once (docs/design.md, "
                  "\"Writes on a mirror\")");
  sub->add_option("--bucket-free-space-ratio", a->bucket_free_space,
                  "file storage: share of the bucket directory's disk kept free; writes that would go "
                  "below it fail with ENOSPC (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  sub->add_flag("--no-default-permissions", a->no_default_permissions,
                "Leave permission checks to TierFS alone (exact only with --entry-cache 0 "
                "--dir-entry-cache 0: the kernel resolves cached paths without asking)");
  sub->add_flag("--no-sync-blocks", a->no_sync_blocks,
                "file storage: do not fsync each block before committing it. Faster small files on a "
                "disk, but after a power loss a file written shortly before may point at a lost block "
                "(EIO; fsck lists it). fsync(2) stays a full barrier either way");
  sub->add_flag("--writeback", a->writeback,
                "Stage written blocks durably on the cache disk and upload them in the background: writes "
                "and close run at local-disk speed. Staged blocks survive a crash and are uploaded at the next "
                "mount; unmounting waits for the uploads");
  sub->add_option("--compact-grace", a->compact_grace,
                  "Seconds the blocks that compaction replaced stay in the object store, for readers (on any "
                  "client) still using the old layout")
      ->check(CLI::Range(0.0, 86400.0 * 7))
      ->capture_default_str();
  sub->add_option("--upload-delay", a->upload_delay,
                  "With --writeback: seconds a staged block waits before its upload starts (a burst of writes "
                  "runs without uploads competing; files deleted meanwhile are never uploaded)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  sub->add_option("--backup-meta", a->backup_meta,
                  "Seconds between automatic metadata backups into the object store (VOLUME/meta/, zstd-compressed "
                  "dumps that `tierfs load` restores), taken by one client at a time; 0: none")
      ->check(CLI::Range(0.0, 86400.0 * 30))
      ->capture_default_str();
  sub->add_option("--backup-keep", a->backup_keep, "Metadata backups kept in the object store (the newest)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--metrics", a->metrics,
                  "Serve Prometheus metrics at http://ADDR:PORT/metrics (default 127.0.0.1:9567; the next free port "
                  "when taken; 0: off)");
  sub->add_option("--slow-op", a->slow_op,
                  "Log requests slower than this many seconds, with their path and where the time went (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_option("--subdir", a->subdir,
                  "Mount this directory of the volume (a path from its root) as the mount's root; nothing "
                  "above it is reachable through the mount");
  sub->add_option("--pack-below", a->pack_below,
                  "With --writeback: files written in one piece of at most this size are packed together into "
                  "shared objects as they upload (a pack per 16 MiB, not a PUT per file); 0: no packing. Needs a "
                  "volume of format version 3")
      ->capture_default_str();
  sub->add_flag("--update-fstab", a->update_fstab,
                "Once mounted, add (or replace) this mount point's line in /etc/fstab ($TIERFS_FSTAB): the "
                "META-URL, type tierfs, _netdev and the options given here, so that `mount MOUNTPOINT` and boot "
                "mount it again (through mount.tierfs)");
}

// Options that contradict each other or do nothing together, and -o options FUSE does not
// know (mount_checks.h).
Status CheckMountArgs(const MountArgs& a, const CLI::App& sub) {
  MountChoices c;
  c.read_only = a.read_only;
  Status st = CheckFuseOptions(SplitMountOptions(a.options, &c.read_only));
  if (!st.ok()) return st;
  auto given = [&](const char* name) { return sub.count(name) > 0; };
  c.writeback = a.writeback;
  c.pack_below = given("--pack-below");
  c.upload_delay = given("--upload-delay");
  auto size = ParseSize(a.cache.cache_size);
  c.cache_in_memory = a.cache.cache_dir == "memory" || (size.ok() && *size == 0);
  c.cache_writes = a.cache.cache_writes;
  c.cache_group = !a.group.name.empty();
  c.group_addr = given("--group-addr");
  c.no_sharing = a.group.no_sharing;
  return CheckMountChoices(c);
}

// -o noatime, strictatime, relatime (the default) and atime (= relatime, as mount(8)):
// the last one given wins. They also reach the kernel's mount flags.
AtimeMode AtimeModeOf(const std::vector<std::string>& opts) {
  AtimeMode m = AtimeMode::kRelatime;
  for (const auto& o : opts) {
    if (o == "noatime") m = AtimeMode::kNone;
    else if (o == "strictatime") m = AtimeMode::kStrict;
    else if (o == "relatime" || o == "atime") m = AtimeMode::kRelatime;
  }
  return m;
}

// FUSE worker threads. On the embedded default (SQLite and a local directory) a handler
// is CPU work that never waits on a network, and workers beyond a couple per CPU only add
// sleeps, wake-ups and lock contention (measured: 16 workers made 4-thread small-file
// creates on 2 CPUs 15% slower than 4). A remote engine or store makes handlers wait on
// round trips, and more workers keep more of them in flight.
int FuseThreadsFor(const std::string& meta_url, const std::string& storage) {
  auto url = ParseUrl(meta_url);
  bool local = url.ok() && (url->scheme == "sqlite3" || url->scheme == "mem") && (storage == "file" || storage == "mem");
  if (!local) return 16;
  return static_cast<int>(std::max(4u, 2 * std::thread::hardware_concurrency()));
}

}  // namespace tierfs::cmd
