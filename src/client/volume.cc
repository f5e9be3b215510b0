#include "client/volume.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>

#include "chunk/cached_store.h"
#include "chunk/writeback.h"
#include "client/bucket_claim.h"
#include "client/metrics_setup.h"
#include "client/open.h"
#include "client/staged_recovery.h"
#include "common/size.h"
#include "meta/mirror_state.h"
#include "metrics/metrics.h"
#include "object/checksum_store.h"
#include "object/object_store.h"
#include "tools/bucket_owner.h"
#include "tools/meta_backup.h"
#include "vfs/writeback_marks.h"

namespace tierfs::client {
namespace {

// `subdir`: the directory of the volume (a path from its root) to serve as the root.
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

}  // namespace

Result<std::unique_ptr<Volume>> Volume::Open(const VolumeOptions& options) {
  std::unique_ptr<Volume> v(new Volume(options));
  Status st = v->Start();
  if (!st.ok()) {
    v->Close();  // undoes whatever started, in order
    return st;
  }
  return v;
}

Volume::Volume(const VolumeOptions& options) : options_(options) {}

Volume::~Volume() { Close(); }

Status Volume::Start() {
  const VolumeOptions& o = options_;
  auto buffer = ParseSize(o.buffer_size);
  if (!buffer.ok()) return buffer.status().With("--buffer-size");
  if (*buffer < (16u << 20)) return Status::Err(EINVAL, "--buffer-size must be at least 16M");

  const bool forwards = !o.primary_url.empty();
  if (forwards && o.read_only) {
    return Status::Err(EINVAL, "--primary makes a mirror writable: leave out --read-only (a mirror opens read-only "
                               "without --primary)");
  }
  if (forwards && o.writeback) {
    return Status::Err(EINVAL, "--writeback is not available on a mirror writing through its primary: blocks must "
                               "be in the primary's store when the primary commits the metadata naming them");
  }
  if (forwards) {
    ASSIGN_OR_RETURN(meta_, OpenMirrorWriter(o.meta_url, o.primary_url, static_cast<int64_t>(o.attr_cache * 1e9)));
  } else {
    ASSIGN_OR_RETURN(meta_, OpenVolume(o.meta_url, o.read_only, static_cast<int64_t>(o.attr_cache * 1e9)));
  }
  if (!meta_->format().mirror_of.empty()) {
    // A mirror (meta/mirror_state.h): readable once seeded, written only by its replicator.
    ASSIGN_OR_RETURN(auto ms, ReadMirrorState(meta_->engine()));
    if (!ms || ms->seeding) {
      return Status::Err(EAGAIN, "volume " + meta_->format().name + " is a mirror of " + meta_->format().mirror_of +
                                     " still being seeded: it opens once `tierfs status` no longer says \"seeding\" "
                                     "(the replicator, `tierfs mirror`, must be running)");
    }
    if (forwards) {
      spdlog::info("volume {} is a mirror of {}: reads from the mirror, writes to the primary at {}",
                   meta_->format().name, meta_->format().mirror_of, meta_->engine()->Describe());
    } else if (!o.read_only) {
      spdlog::info("volume {} is a mirror of {}: opened read-only", meta_->format().name, meta_->format().mirror_of);
      options_.read_only = true;
      meta_.reset();
      ASSIGN_OR_RETURN(meta_, OpenVolume(o.meta_url, true, static_cast<int64_t>(o.attr_cache * 1e9)));
    }
  }
  const bool ro = o.read_only;
  const FormatRecord& fmt = meta_->format();
  ASSIGN_OR_RETURN(auto store, OpenStore(fmt, o.sync_blocks, o.cache.io_timeout, o.bucket_free_space, forwards));
  if (!ro) {
    Status init = store->Init();
    if (!init.ok()) return Status::Err(init.code(), init.message() + StagedNote(o.cache, fmt, o.meta_url));
  }
  StoreConfig cfg;
  cfg.volume = fmt.name;
  cfg.block_size = fmt.block_size;
  // Memory: buffer_size for data being written and read (half holds written data awaiting
  // upload, the rest covers prefetches in flight and recycled buffers), plus the memory
  // block cache.
  cfg.buffer_bytes = *buffer / 2;
  RETURN_IF_ERROR(ApplyCacheOptions(o.cache, fmt, &cfg));
  cfg.upload_threads = o.upload_threads;
  cfg.download_threads = o.download_threads;
  auto pack_below = ParseSize(o.pack_below);
  if (!pack_below.ok() || *pack_below > fmt.block_size) {
    return Status::Err(EINVAL, "--pack-below " + o.pack_below + ": give a size of at most the block size (" +
                                   std::to_string(fmt.block_size) + " bytes), or 0 for no packing");
  }
  // Packed records need format version 3: older clients would not look for the packs.
  if (fmt.version >= 3) cfg.pack_below = static_cast<uint32_t>(*pack_below);
  cached_ = std::make_unique<CachedStore>(std::move(store), cfg);
  LogCacheState(cached_.get(), cfg);
  // Only the engine that owns the volume's objects writes and deletes them (a loaded copy
  // opens read-only); a running client stops deleting once another engine took them over.
  // A mirror's writing client is a client of its primary, whose own clients hold the claim.
  if (!ro && !forwards) {
    ASSIGN_OR_RETURN(owner_, OwnBucketFor(meta_->engine(), cached_->store(), fmt, o.meta_url,
                                          "opening the volume read-write"));
  }
  if (o.writeback && !ro) {
    ASSIGN_OR_RETURN(wb_dir_, StagingDirFor(o.cache, fmt));
  }
  // Blocks an earlier write-back client left staged in the other cache directories are
  // uploaded before anything is served (or the volume does not open, saying how to recover).
  RETURN_IF_ERROR(RecoverStagedBlocks(o.cache, meta_.get(), ro, wb_dir_, o.meta_url));
  if (!wb_dir_.empty()) {
    Meta* m = meta_.get();
    cached_->SetPackMeta(PackMeta{[m] { return m->NewSliceId(); },
                                  [m](uint64_t pack, uint32_t len, const std::vector<PackEntry>& members) {
                                    std::vector<PackedSlice> ps;
                                    for (const auto& e : members) ps.push_back(PackedSlice{e.slice, e.off, e.len});
                                    return m->RecordPack(pack, len, ps).status();
                                  }});
    Status wb = cached_->StartWriteback(wb_dir_, std::min(o.upload_threads, 8),
                                        std::chrono::milliseconds(static_cast<int64_t>(o.upload_delay * 1000)));
    if (!wb.ok()) return wb.With("--writeback");
    spdlog::info("write-back: written blocks are staged in {} and uploaded in the background", wb_dir_);
  }
  if (!o.subdir.empty()) {
    ASSIGN_OR_RETURN(root_, ResolveSubdir(meta_.get(), o.subdir));
  }

  RETURN_IF_ERROR(meta_->NewSession(ThisProcessSession(o.label)));
  session_open_ = true;
  if (!wb_dir_.empty()) {
    // Where what this client stages waits, for status and fsck should it die.
    Status s = meta_->RecordStagingArea(wb_dir_);
    if (!s.ok()) spdlog::warn("cannot record the staging area in the metadata: {}", s.ToString());
  }
  if (!o.group.name.empty()) {
    auto joined = JoinGroup(o.group, o.meta_url, meta_.get(), cached_.get());
    if (!joined.ok()) return joined.status().With("--cache-group " + o.group.name);
    group_ = std::move(*joined);
  }
  CachedStore* cs = cached_.get();
  OwnerGuard* g = owner_.get();  // null read-only, where nothing is deleted
  meta_->SetPackDeleter([cs, g](uint64_t pack, uint32_t len) -> Status {
    if (g) RETURN_IF_ERROR(g->CheckDelete());
    return cs->DeletePack(pack, len);
  });
  meta_->StartBackground([cs, g](uint64_t id, uint32_t size) -> Status {
    if (g) RETURN_IF_ERROR(g->CheckDelete());
    return cs->DeleteSlice(id, size);
  });
  background_started_ = true;
  if (cached_->writeback()) marks_ = std::make_unique<WritebackMarks>(meta_.get(), cached_.get());
  if (!ro && o.backup_meta > 0) {
    // Past the checksum layer: a backup is a plain zstd file (with its own checksum) that
    // any tool can fetch from the store when the metadata engine is gone.
    ObjectStore* raw = cached_->store();
    if (auto* sums = dynamic_cast<ChecksumStore*>(raw)) raw = sums->inner();
    backups_ = std::make_unique<BackupLoop>(meta_.get(), raw, static_cast<int64_t>(o.backup_meta), o.backup_keep);
  }

  auto exporter = StartMetrics(o.metrics.empty() ? kDefaultMetricsAddr : o.metrics, fmt.name, o.label, cached_.get());
  if (!exporter.ok() && o.metrics.empty()) {
    spdlog::warn("no metrics endpoint: {}", exporter.status().ToString());
    exporter = std::unique_ptr<metrics::Exporter>();
  }
  if (!exporter.ok()) return exporter.status().With("--metrics");
  exporter_ = std::move(*exporter);
  if (exporter_) spdlog::info("metrics on http://{}/metrics", exporter_->address());

  VfsOptions vopts;
  vopts.read_only = ro;
  vopts.metrics_stats = [] { return metrics::Default().SnapshotJson(); };
  if (exporter_) vopts.metrics_addr = exporter_->address();
  vopts.root = root_;
  vopts.open_cache_ns = static_cast<int64_t>(o.open_cache * 1e9);
  vopts.atime = o.atime;
  vopts.compactor.release_grace_ns = static_cast<int64_t>(o.compact_grace * 1e9);
  if (const char* f = getenv("TIERFS_FAULT_NO_COMPACTION"); f && *f == '1') {
    // A chunk of thousands of slices, as when compaction keeps failing (tests only).
    spdlog::warn("TIERFS_FAULT_NO_COMPACTION: this client never compacts a chunk (tests only)");
    vopts.compactor.check_after = vopts.compactor.max_records = UINT32_MAX;
  }
  if (group_) vopts.group_stats = [gr = group_.get()] { return gr->StatsJson(); };
  vfs_ = std::make_unique<Vfs>(meta_.get(), cached_.get(), vopts);
  return Status::OK();
}

std::string Volume::metrics_address() const { return exporter_ ? exporter_->address() : ""; }

void Volume::Close() {
  vfs_.reset();  // commits buffered writes
  if (cached_ && cached_->writeback()) {
    // Other clients read this client's staged blocks only once they are uploaded: finish
    // that before leaving (`tierfs umount` waits for it; what a kill leaves behind is
    // uploaded at the next start).
    WritebackStats left = cached_->DrainWriteback(std::chrono::hours(24 * 365), [](const WritebackStats& w) {
      spdlog::info("write-back: {} blocks ({} bytes) still staged; uploading them before exiting", w.staged_blocks,
                   w.staged_bytes);
    });
    if (left.staged_blocks == 0) spdlog::info("write-back: every staged block is uploaded");
    marks_.reset();
    if (session_open_) {
      Status dropped = left.staged_blocks == 0 ? meta_->DropStagingArea() : Status::OK();
      if (dropped.ok()) dropped = meta_->PruneStagingAreas();
      if (!dropped.ok()) spdlog::warn("cannot update the staging records: {}", dropped.ToString());
    }
  }
  marks_.reset();
  backups_.reset();
  exporter_.reset();
  if (group_) group_->Stop();  // its refresh reads the store's stats and writes the session
  if (background_started_) {
    meta_->StopBackground();
    background_started_ = false;
  }
  if (session_open_) {
    Status s = meta_->CloseSession();
    if (!s.ok()) spdlog::warn("closing the session failed: {}", s.ToString());
    session_open_ = false;
  }
  owner_.reset();   // it checks ownership through the store below
  cached_.reset();  // waits for prefetches, which may still ask the group
  group_.reset();
}

}  // namespace tierfs::client
