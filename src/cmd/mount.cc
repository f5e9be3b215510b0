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
#include "cmd/daemon.h"
#include "cmd/fstab.h"
#include "cmd/group_member.h"
#include "cmd/mount_args.h"
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

// Everything after validation: open the volume, mount, serve until unmounted. `ready` is
// called exactly once with the outcome of mounting.
int Serve(const MountArgs& a, const ReadyFn& ready) {
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
int RunForeground(const MountArgs& a, const std::function<void()>& on_mounted) {
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

// Forks (cmd/daemon.h): returns once the mount is ready (exit 0) or with the error.
int RunBackground(const MountArgs& a) {
  // Counted before mounting: the background process cannot write to the terminal.
  std::string hidden = HiddenEntriesWarning(a.mountpoint);
  const std::string log_file = a.log_file.empty() ? "/var/log/tierfs.log" : a.log_file;
  return RunDetached("mount", log_file, hidden, [&](const ReadyFn& ready) { return Serve(a, ready); });
}

}  // namespace

void RegisterMount(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<MountArgs>();
  auto* sub = app.add_subcommand("mount", "Mount a volume (foreground unless -d)");
  AddMountOptions(sub, a.get());
  sub->callback([a, exit_code, sub] {
    // Refused here, on the caller's terminal, before anything is opened.
    Status checked = CheckMountArgs(*a, *sub);
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
