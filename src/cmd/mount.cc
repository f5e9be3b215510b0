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

#include "chunk/flat_files.h"
#include "client/cache_setup.h"
#include "client/volume.h"
#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "cmd/daemon.h"
#include "cmd/fstab.h"
#include "cmd/mount_args.h"
#include "cmd/mount_checks.h"
#include "cmd/util.h"
#include "common/size.h"
#include "fuse/fuse_adapter.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"

namespace tierfs::cmd {
namespace {

// What one server's loss could lose, as the engine's servers say: a warning in the log, or
// with --require-safe-meta a refusal that lists it.
Status CheckMetaDurability(KvEngine* engine, bool require) {
  auto d = engine->Durability();
  if (!d.ok()) {
    if (require) {
      return Status::Err(EINVAL, "--require-safe-meta: cannot tell how " + engine->Describe() +
                                     " keeps a commit: " + d.status().message());
    }
    spdlog::warn("metadata engine {}: cannot tell how it keeps a commit: {}", engine->Describe(), d.status().message());
    return Status::OK();
  }
  if (d->safe) {
    spdlog::info("metadata engine: {} (safe against one server's loss)", d->summary);
    return Status::OK();
  }
  std::string risks;
  for (const auto& r : d->risks) risks += "; " + r;
  if (require) {
    return Status::Err(EINVAL, "--require-safe-meta: " + d->summary + " is not safe against one server's loss" +
                                   risks);
  }
  spdlog::warn("metadata engine: {} is not safe against one server's loss{}", d->summary, risks);
  return Status::OK();
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

  client::VolumeOptions vo;
  vo.meta_url = a.meta_url;
  vo.label = mp;
  vo.read_only = ro;
  vo.primary_url = a.primary;
  vo.attr_cache = a.attr_cache;
  vo.buffer_size = a.buffer_size;
  vo.cache = a.cache;
  vo.group = a.group;
  vo.upload_threads = a.upload_threads;
  vo.download_threads = a.download_threads;
  vo.sync_blocks = !a.no_sync_blocks;
  vo.bucket_free_space = a.bucket_free_space;
  vo.writeback = a.writeback;
  vo.upload_delay = a.upload_delay;
  vo.pack_below = a.pack_below;
  vo.subdir = a.subdir;
  vo.backup_meta = a.backup_meta;
  vo.backup_keep = a.backup_keep;
  vo.metrics = a.metrics;
  vo.open_cache = a.open_cache;
  vo.atime = AtimeModeOf(atime_opts);
  vo.compact_grace = a.compact_grace;
  if (a.require_safe_meta) {
    // Asked before the volume is opened, which writes (the session): where commits are
    // not safe they may also hang (a PostgreSQL primary whose synchronous standby is gone
    // waits for it), and the refusal should not wait out the engine's timeout first.
    auto engine = OpenKvEngine(a.meta_url);
    if (!engine.ok()) return fail(engine.status());
    if (Status safe = CheckMetaDurability(engine->get(), true); !safe.ok()) return fail(safe);
  }
  auto volume = client::Volume::Open(vo);
  if (!volume.ok()) return fail(volume.status());
  if (Status safe = CheckMetaDurability((*volume)->meta()->engine(), a.require_safe_meta); !safe.ok()) {
    return fail(safe);
  }
  const FormatRecord& fmt = (*volume)->format();
  int rc = 0;
  FuseOptions fopts;
  fopts.mountpoint = mp;
  fopts.root = (*volume)->root();
  fopts.slow_op_ns = static_cast<int64_t>(a.slow_op * 1e9);
  fopts.fsname = MountSource(a.meta_url, fmt.name);
  fopts.attr_timeout = a.attr_cache;
  fopts.entry_timeout = a.entry_cache;
  fopts.dir_entry_timeout = a.dir_entry_cache;
  fopts.meta_watch = !a.no_meta_watch;
  fopts.passthrough = !a.no_passthrough;
  fopts.io_uring = a.io_uring;
  fopts.io_uring_threads = a.io_uring_threads;
  fopts.io_uring_depth = a.io_uring_depth;
  if (fopts.passthrough) {
    auto min_size = ParseSize(a.passthrough_min_size);
    if (!min_size.ok()) return fail(Status::Err(EINVAL, "--passthrough-min-size: " + min_size.status().message()));
    auto flat = client::OpenFlatCopies((*volume)->store(), a.cache, a.passthrough_cache_size);
    if (!flat.ok()) return fail(flat.status());
    if (*flat) (*volume)->vfs()->EnableFlatCopies(std::move(*flat), *min_size);
  }
  // A mirror opens read-only whatever was asked (client/volume.cc): so does the kernel mount.
  if ((*volume)->read_only() && !ro) mount_opts.push_back("ro");
  fopts.mount_options = mount_opts;
  fopts.max_threads = a.fuse_threads > 0 ? a.fuse_threads : FuseThreadsFor(a.meta_url, fmt.storage);
  spdlog::info("mounting volume {} ({}) on {} with {} FUSE worker threads", fmt.name, fmt.uuid, mp, fopts.max_threads);
  Status run = RunFuse((*volume)->vfs(), fopts, [&](const Status& r) {
    if (r.ok()) spdlog::info("mounted {} on {}", fmt.name, mp);
    ready(r);
  });
  if (!run.ok()) {
    spdlog::error("{}", run.ToString());
    rc = 1;
  }
  spdlog::info("unmounted {}; committing buffered writes", mp);
  (*volume)->Close();
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
