// tierfs mount META-URL MOUNTPOINT [-d] [--log FILE] [cache and buffer options] [-o opts]
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <thread>

#include "chunk/cached_store.h"
#include "cmd/bucket_owner_cmd.h"
#include "cmd/cache_options.h"
#include "cmd/commands.h"
#include "cmd/fstab.h"
#include "cmd/group_member.h"
#include "cmd/mount_checks.h"
#include "cmd/mount_metrics.h"
#include "cmd/staged_recovery.h"
#include "cmd/util.h"
#include "common/size.h"
#include "common/url.h"
#include "fuse/fuse_adapter.h"
#include "meta/meta.h"
#include "metrics/metrics.h"
#include "object/checksum_store.h"
#include "object/object_store.h"
#include "chunk/writeback.h"
#include "vfs/vfs.h"
#include "tools/bucket_owner.h"
#include "tools/meta_backup.h"
#include "vfs/writeback_marks.h"

namespace tierfs::cmd {
namespace {

// `--subdir DIR`: the directory of the volume (a path from its root) to mount as the root.
Result<Ino> ResolveSubdir(Meta* meta, const std::string& path) {
  Ino ino = kRootIno;
  std::string walked;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    pos = slash == std::string::npos ? path.size() + 1 : slash + 1;
    if (part.empty()) continue;
    if (part == "." || part == "..") {
      return Status::Err(EINVAL, "--subdir " + path + ": give a path from the volume's root without . or ..");
    }
    walked += "/" + part;
    auto r = meta->Lookup(Ctx::Root(), ino, part);
    if (!r.ok()) {
      return r.status().code() == ENOENT
                 ? Status::Err(ENOENT, "--subdir " + path + ": " + walked + " does not exist in the volume")
                 : r.status().With("--subdir " + path);
    }
    if (!r->second.IsDir()) return Status::Err(ENOTDIR, "--subdir " + path + ": " + walked + " is not a directory");
    ino = r->first;
  }
  return ino;
}

struct Args {
  std::string meta_url, mountpoint, log_file;
  std::string metrics;  // "": the default address, and no error when it cannot be used
  double slow_op = 1.0;
  bool background = false;
  double attr_cache = 1.0, entry_cache = 1.0, dir_entry_cache = 1.0;
  std::string buffer_size = "300M";
  CacheArgs cache;
  GroupArgs group;
  double open_cache = 0;
  int upload_threads = 16, download_threads = 8;
  std::vector<std::string> options;
  bool read_only = false;
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

// A mount point that holds entries: the mount hides them until it is unmounted (as any
// mount does). Returns the warning to give, or "" when there is none (an empty directory,
// or one that cannot be read: the checks before mounting report what is wrong with it).
std::string HiddenEntriesWarning(const std::string& mp) {
  if (IsMountPoint(mp)) return "";  // refused before mounting
  DIR* dir = opendir(mp.c_str());
  if (dir == nullptr) return "";
  uint64_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) ++n;
  }
  closedir(dir);
  if (n == 0) return "";
  return "mount point " + mp + " is not empty: the mount hides its " + std::to_string(n) +
         (n == 1 ? " entry" : " entries") + " until it is unmounted";
}

// Options that contradict each other or do nothing together, and -o options FUSE does not
// know (mount_checks.h).
Status CheckOptions(const Args& a, const CLI::App& sub) {
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

// Everything after validation: open the volume, mount, serve until unmounted. `ready` is
// called exactly once with the outcome of mounting.
int Serve(const Args& a, const std::function<void(const Status&)>& ready) {
  // Block-sized buffers come and go all the time: keep them in the heap (not separate
  // mappings) and keep freed memory mapped, so reuse costs no page faults. Peak memory is
  // bounded by --buffer-size anyway.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_ARENA_MAX, 4);
  std::string mp = AbsPath(a.mountpoint);
  bool ro = a.read_only;
  std::vector<std::string> atime_opts;
  std::vector<std::string> mount_opts = SplitMountOptions(a.options, &ro, &atime_opts);
  if (ro) mount_opts.push_back("ro");
  // The kernel checks permissions with the attributes it caches, including for paths it
  // resolves from its own dentry cache without asking us; TierFS checks them again.
  bool has_dp = false;
  for (const auto& o : mount_opts) has_dp |= o == "default_permissions";
  if (!has_dp && !a.no_default_permissions) mount_opts.push_back("default_permissions");

  auto fail = [&](const Status& st) {
    ready(st);
    return 1;
  };
  auto buffer = ParseSize(a.buffer_size);
  if (!buffer.ok()) return fail(buffer.status().With("--buffer-size"));
  if (*buffer < (16u << 20)) return fail(Status::Err(EINVAL, "--buffer-size must be at least 16M"));
  struct stat st;
  if (stat(mp.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOTCONN) {
      return fail(Status::Err(EBUSY, mp + " is the stale mount of a client that died; run `tierfs umount --force " +
                                         mp + "` first"));
    }
    if (err == ENOENT) return fail(Status::Err(ENOENT, "mount point " + mp + " does not exist"));
    return fail(Status::Err(err, "cannot use mount point " + mp + ": " + strerror(err)));
  }
  if (!S_ISDIR(st.st_mode)) return fail(Status::Err(ENOTDIR, "mount point " + mp + " is not a directory"));
  if (IsMountPoint(mp)) {
    return fail(Status::Err(EBUSY, mp + " is already mounted (is a mount point); unmount it first"));
  }
  std::string hidden = HiddenEntriesWarning(mp);
  if (!hidden.empty()) spdlog::warn("{}", hidden);

  auto meta = OpenVolume(a.meta_url, ro, static_cast<int64_t>(a.attr_cache * 1e9));
  if (!meta.ok()) return fail(meta.status());
  const FormatRecord& fmt = (*meta)->format();
  auto store = OpenStore(fmt, !a.no_sync_blocks, a.cache.io_timeout, a.bucket_free_space);
  if (!store.ok()) return fail(store.status());
  if (!ro) {
    Status init = (*store)->Init();
    if (!init.ok()) return fail(Status::Err(init.code(), init.message() + StagedNote(a.cache, fmt, a.meta_url)));
  }
  StoreConfig cfg;
  cfg.volume = fmt.name;
  cfg.block_size = fmt.block_size;
  // Memory: --buffer-size for data being written and read (half holds written data
  // awaiting upload, the rest covers prefetches in flight and recycled buffers), plus the
  // memory block cache.
  cfg.buffer_bytes = *buffer / 2;
  Status caches = ApplyCacheOptions(a.cache, fmt, &cfg);
  if (!caches.ok()) return fail(caches);
  cfg.upload_threads = a.upload_threads;
  cfg.download_threads = a.download_threads;
  auto pack_below = ParseSize(a.pack_below);
  if (!pack_below.ok() || *pack_below > fmt.block_size) {
    return fail(Status::Err(EINVAL, "--pack-below " + a.pack_below + ": give a size of at most the block size (" +
                                        std::to_string(fmt.block_size) + " bytes), or 0 for no packing"));
  }
  // Packed records need format version 3: older clients would not look for the packs.
  if (fmt.version >= 3) cfg.pack_below = static_cast<uint32_t>(*pack_below);
  auto cached = std::make_unique<CachedStore>(std::move(*store), cfg);
  LogCacheState(cached.get(), cfg);
  // Only the engine that owns the volume's objects writes and deletes them (a loaded copy
  // mounts read-only); a running mount stops deleting once another engine took them over.
  std::unique_ptr<OwnerGuard> owner;
  if (!ro) {
    auto g = OwnBucketFor((*meta)->engine(), cached->store(), fmt, a.meta_url, "mounting read-write");
    if (!g.ok()) return fail(g.status());
    owner = std::move(*g);
  }
  std::string wb_dir;  // where this mount stages (--writeback)
  if (a.writeback && !ro) {
    auto dir = StagingDirFor(a.cache, fmt);
    if (!dir.ok()) return fail(dir.status());
    wb_dir = *dir;
  }
  // Blocks an earlier write-back client left staged in the other cache directories are
  // uploaded before anything is served (or the mount refuses, saying how to recover).
  Status recovered = RecoverStagedBlocks(a.cache, meta->get(), ro, wb_dir, a.meta_url);
  if (!recovered.ok()) return fail(recovered);
  if (!wb_dir.empty()) {
    Meta* m = meta->get();
    cached->SetPackMeta(PackMeta{[m] { return m->NewSliceId(); },
                                 [m](uint64_t pack, uint32_t len, const std::vector<PackEntry>& members) {
                                   std::vector<PackedSlice> ps;
                                   for (const auto& e : members) ps.push_back(PackedSlice{e.slice, e.off, e.len});
                                   return m->RecordPack(pack, len, ps).status();
                                 }});
    Status wb = cached->StartWriteback(wb_dir, std::min(a.upload_threads, 8),
                                       std::chrono::milliseconds(static_cast<int64_t>(a.upload_delay * 1000)));
    if (!wb.ok()) return fail(wb.With("--writeback"));
    spdlog::info("write-back: written blocks are staged in {} and uploaded in the background", wb_dir);
  }

  Ino root = kRootIno;
  if (!a.subdir.empty()) {
    auto r = ResolveSubdir(meta->get(), a.subdir);
    if (!r.ok()) return fail(r.status());
    root = *r;
  }

  Status s = (*meta)->NewSession(ThisProcessSession(mp));
  if (!s.ok()) return fail(s);
  if (!wb_dir.empty()) {
    // Where what this client stages waits, for status and fsck should it die.
    s = (*meta)->RecordStagingArea(wb_dir);
    if (!s.ok()) spdlog::warn("cannot record the staging area in the metadata: {}", s.ToString());
  }
  std::unique_ptr<GroupRuntime> group;
  if (!a.group.name.empty()) {
    auto joined = JoinGroup(a.group, a.meta_url, meta->get(), cached.get());
    if (!joined.ok()) {
      (*meta)->CloseSession().ok();
      return fail(joined.status().With("--cache-group " + a.group.name));
    }
    group = std::move(*joined);
  }
  CachedStore* cs = cached.get();
  OwnerGuard* g = owner.get();  // null read-only, where nothing is deleted
  (*meta)->SetPackDeleter([cs, g](uint64_t pack, uint32_t len) -> Status {
    if (g) RETURN_IF_ERROR(g->CheckDelete());
    return cs->DeletePack(pack, len);
  });
  (*meta)->StartBackground([cs, g](uint64_t id, uint32_t size) -> Status {
    if (g) RETURN_IF_ERROR(g->CheckDelete());
    return cs->DeleteSlice(id, size);
  });

  std::unique_ptr<WritebackMarks> marks;
  if (cached->writeback()) marks = std::make_unique<WritebackMarks>(meta->get(), cached.get());
  std::unique_ptr<BackupLoop> backups;  // stopped before the session closes
  if (!ro && a.backup_meta > 0) {
    // Past the checksum layer: a backup is a plain zstd file (with its own checksum) that
    // any tool can fetch from the store when the metadata engine is gone.
    ObjectStore* raw = cached->store();
    if (auto* sums = dynamic_cast<ChecksumStore*>(raw)) raw = sums->inner();
    backups = std::make_unique<BackupLoop>(meta->get(), raw, static_cast<int64_t>(a.backup_meta), a.backup_keep);
  }

  auto exporter = StartMetrics(a.metrics.empty() ? kDefaultMetricsAddr : a.metrics, fmt.name, mp, cached.get());
  if (!exporter.ok() && a.metrics.empty()) {
    spdlog::warn("no metrics endpoint: {}", exporter.status().ToString());
    exporter = std::unique_ptr<metrics::Exporter>();
  }
  if (!exporter.ok()) {
    (*meta)->StopBackground();
    (*meta)->CloseSession().ok();
    return fail(exporter.status().With("--metrics"));
  }
  if (*exporter) spdlog::info("metrics on http://{}/metrics", (*exporter)->address());

  VfsOptions vopts;
  vopts.read_only = ro;
  vopts.metrics_stats = [] { return metrics::Default().SnapshotJson(); };
  if (*exporter) vopts.metrics_addr = (*exporter)->address();
  vopts.root = root;
  vopts.open_cache_ns = static_cast<int64_t>(a.open_cache * 1e9);
  vopts.atime = AtimeModeOf(atime_opts);
  vopts.compactor.release_grace_ns = static_cast<int64_t>(a.compact_grace * 1e9);
  if (group) vopts.group_stats = [g = group.get()] { return g->StatsJson(); };
  int rc = 0;
  {
    Vfs vfs(meta->get(), cached.get(), vopts);
    FuseOptions fopts;
    fopts.mountpoint = mp;
    fopts.root = root;
    fopts.slow_op_ns = static_cast<int64_t>(a.slow_op * 1e9);
    fopts.fsname = MountSource(a.meta_url, fmt.name);
    fopts.attr_timeout = a.attr_cache;
    fopts.entry_timeout = a.entry_cache;
    fopts.dir_entry_timeout = a.dir_entry_cache;
    fopts.mount_options = mount_opts;
    fopts.max_threads = a.fuse_threads > 0 ? a.fuse_threads : FuseThreadsFor(a.meta_url, fmt.storage);
    spdlog::info("mounting volume {} ({}) on {} with {} FUSE worker threads", fmt.name, fmt.uuid, mp, fopts.max_threads);
    Status run = RunFuse(&vfs, fopts, [&](const Status& r) {
      if (r.ok()) spdlog::info("mounted {} on {}", fmt.name, mp);
      ready(r);
    });
    if (!run.ok()) {
      spdlog::error("{}", run.ToString());
      rc = 1;
    }
    spdlog::info("unmounted {}; committing buffered writes", mp);
  }
  if (cached->writeback()) {
    // Other clients read this client's staged blocks only once they are uploaded: finish
    // that before leaving (`tierfs umount` waits for it; what a kill leaves behind is
    // uploaded at the next mount).
    WritebackStats left = cached->DrainWriteback(std::chrono::hours(24 * 365), [](const WritebackStats& w) {
      spdlog::info("write-back: {} blocks ({} bytes) still staged; uploading them before exiting", w.staged_blocks,
                   w.staged_bytes);
    });
    if (left.staged_blocks == 0) spdlog::info("write-back: every staged block is uploaded");
    marks.reset();
    Status dropped = left.staged_blocks == 0 ? (*meta)->DropStagingArea() : Status::OK();
    if (dropped.ok()) dropped = (*meta)->PruneStagingAreas();
    if (!dropped.ok()) spdlog::warn("cannot update the staging records: {}", dropped.ToString());
  }
  backups.reset();
  exporter->reset();
  if (group) group->Stop();  // its refresh reads the store's stats and writes the session
  (*meta)->StopBackground();
  s = (*meta)->CloseSession();
  if (!s.ok()) spdlog::warn("closing the session failed: {}", s.ToString());
  cached.reset();  // waits for prefetches, which may still ask the group
  group.reset();
  spdlog::info("tierfs mount of {} exited", mp);
  spdlog::shutdown();
  return rc;
}

// on_mounted: called once the mount is ready.
int RunForeground(const Args& a, const std::function<void()>& on_mounted) {
  SetupLogging(a.log_file, true);
  // Without --log the log is stderr already.
  std::string hidden = a.log_file.empty() ? "" : HiddenEntriesWarning(a.mountpoint);
  bool reported = false;
  int rc = Serve(a, [&](const Status& st) {
    if (!st.ok() && !reported) std::cerr << "tierfs: mount: " << st.message() << std::endl;
    if (st.ok() && !reported && !hidden.empty()) std::cerr << "tierfs: mount: warning: " << hidden << std::endl;
    if (st.ok() && !reported) on_mounted();
    reported = true;
  });
  return rc;
}

// Forks; the child mounts and tells the parent through a pipe whether mounting worked, so
// the parent returns only when the mount is ready (exit 0) or with the error.
int RunBackground(const Args& a) {
  // Counted before mounting: the background process cannot write to the terminal.
  std::string hidden = HiddenEntriesWarning(a.mountpoint);
  int fds[2];
  if (pipe(fds) != 0) return Fail("mount", Status::Err(errno, "pipe failed"));
  pid_t pid = fork();
  if (pid < 0) return Fail("mount", Status::Err(errno, "fork failed"));
  if (pid > 0) {
    close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) {
      msg.append(buf, static_cast<size_t>(n));
      if (msg.find('\n') != std::string::npos) break;
    }
    close(fds[0]);
    if (msg.rfind("OK", 0) == 0) {
      if (!hidden.empty()) std::cerr << "tierfs: mount: warning: " << hidden << std::endl;
      return 0;
    }
    if (msg.empty()) {
      int status = 0;
      waitpid(pid, &status, 0);
      return Fail("mount", Status::Err(EIO, "the mount process exited before the mount was ready" +
                                                (a.log_file.empty() ? std::string() : "; see " + a.log_file)));
    }
    if (msg.back() == '\n') msg.pop_back();
    std::cerr << "tierfs: mount: " << msg.substr(4) << std::endl;
    return 1;
  }
  close(fds[0]);
  setsid();
  const std::string log_file = a.log_file.empty() ? "/var/log/tierfs.log" : a.log_file;
  SetupLogging(log_file, false);
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (devnull > 2) close(devnull);
  }
  // Standard error goes to the log too: what the runtime says as the process dies (a
  // crash report, see common/crash_report.h) must not go to /dev/null.
  int errfd = OpenLogFile(log_file);
  if (errfd >= 0) {
    dup2(errfd, 2);
    close(errfd);
  }
  if (chdir("/") != 0) {
    // Not fatal: the mount works from any directory.
  }
  int wfd = fds[1];
  int rc = Serve(a, [&](const Status& st) {
    std::string m = st.ok() ? "OK\n" : "ERR " + st.message() + "\n";
    if (wfd >= 0) {
      ssize_t w = write(wfd, m.data(), m.size());
      (void)w;
      close(wfd);
      wfd = -1;
    }
  });
  _exit(rc);
}

}  // namespace

void RegisterMount(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("mount", "Mount a volume (foreground unless -d)");
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
  sub->callback([a, exit_code, sub] {
    // Refused here, on the caller's terminal, before anything is opened.
    Status checked = CheckOptions(*a, *sub);
    if (!checked.ok()) {
      *exit_code = Fail("mount", checked);
      return;
    }
    // The background process works from "/", so relative paths are resolved here, in the
    // caller's directory.
    a->mountpoint = AbsPath(a->mountpoint);
    if (!a->log_file.empty()) a->log_file = AbsPath(a->log_file);
    MakeCacheDirsAbsolute(&a->cache);
    const std::string sqlite = "sqlite3://";
    if (a->meta_url.rfind(sqlite, 0) == 0 && a->meta_url.size() > sqlite.size() &&
        a->meta_url[sqlite.size()] != '/') {
      a->meta_url = sqlite + AbsPath(a->meta_url.substr(sqlite.size()));
    }
    std::string fstab_line;
    if (a->update_fstab) {  // checked before mounting, written once mounted
      auto line = FstabLineFor(*sub, a->meta_url, a->mountpoint,
                               {{"log", a->log_file}, {"cache-dir", a->cache.cache_dir}});
      if (!line.ok()) {
        *exit_code = Fail("mount --update-fstab", line.status());
        return;
      }
      fstab_line = *line;
    }
    auto write_fstab = [&] {
      if (fstab_line.empty()) return true;
      Status st = UpdateFstab(FstabPath(), a->mountpoint, fstab_line);
      if (!st.ok()) {
        std::cerr << "tierfs: mount: mounted, but " << FstabPath() << " was not updated: " << st.message() << std::endl;
        return false;
      }
      return true;
    };
    if (a->background) {
      *exit_code = RunBackground(*a);
      if (*exit_code == 0 && !write_fstab()) *exit_code = 1;
    } else {
      *exit_code = RunForeground(*a, [&] { write_fstab(); });
    }
  });
}

}  // namespace tierfs::cmd
