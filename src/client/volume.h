// One opened volume, as every front end uses it: the FUSE mount today, the S3 gateway, sync,
// mirrors and the Python SDK next (docs/design.md, "One client library"). A front end parses
// its options into VolumeOptions, opens a Volume, serves its protocol through vfs(), and
// closes it; it never repeats the start-up or the shutdown.
//
// Start-up order (Open), each step failing with a Status that says what to do:
//   metadata engine and volume -> object store (Init when read-write) -> cached store ->
//   bucket ownership (read-write) -> staged blocks an earlier write-back client left
//   (uploaded before anything is served) -> write-back -> session (and its staging record) ->
//   cache group -> background work (slice cleanup, trash, the heartbeat's own thread) ->
//   metadata backups -> metrics -> Vfs.
// Shutdown order (Close, also run by the destructor), so that nothing outlives what it
// uses: Vfs (commits buffered writes) -> write-back drained (uploads finish) -> backups ->
// metrics -> the group stops serving and refreshing -> background work -> session closed ->
// cached store (waits for prefetches, which may still ask the group) -> group -> engine.
#pragma once

#include <memory>
#include <string>

#include "client/cache_setup.h"
#include "client/group_member.h"
#include "common/status.h"
#include "meta/meta.h"
#include "vfs/vfs.h"

namespace tierfs {
class CachedStore;
class OwnerGuard;
class BackupLoop;
class WritebackMarks;
namespace metrics {
class Exporter;
}
}  // namespace tierfs

namespace tierfs::client {

struct VolumeOptions {
  std::string meta_url;
  // What `tierfs status` shows this client serving: a mount point, "s3://ADDR".
  std::string label;
  bool read_only = false;
  // A mirror volume's writes go to this primary (`mount --primary`, mirror/forward_writes.h).
  std::string primary_url;
  double attr_cache = 1.0;           // seconds Meta keeps directory attributes
  std::string buffer_size = "300M";  // data in flight: half written, half read ahead
  CacheArgs cache;
  GroupArgs group;                   // name empty: no cache group
  int upload_threads = 16, download_threads = 8;
  bool sync_blocks = true;           // file storage: fsync each block before its commit
  double bucket_free_space = 0.05;   // file storage: share of the bucket's disk kept free
  bool writeback = false;
  double upload_delay = 0;
  std::string pack_below = "1M";
  std::string subdir;                // served as the root; "" for the volume's root
  double backup_meta = 3600;         // seconds between metadata backups; 0: none
  int backup_keep = 7;
  // Prometheus endpoint: "" the default address (no error when it is taken), "0" none.
  std::string metrics;
  double open_cache = 0;
  AtimeMode atime = AtimeMode::kRelatime;
  double compact_grace = 600;
};

class Volume {
 public:
  static Result<std::unique_ptr<Volume>> Open(const VolumeOptions& options);
  ~Volume();
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;

  // The shutdown described above; the Vfs is gone afterwards. Safe to call twice.
  void Close();

  Vfs* vfs() { return vfs_.get(); }
  Meta* meta() { return meta_.get(); }
  CachedStore* store() { return cached_.get(); }
  const FormatRecord& format() const { return meta_->format(); }
  Ino root() const { return root_; }
  bool read_only() const { return options_.read_only; }
  // The metrics endpoint's address, "" when none.
  std::string metrics_address() const;

 private:
  explicit Volume(const VolumeOptions& options);
  Status Start();

  VolumeOptions options_;
  Ino root_ = kRootIno;
  std::string wb_dir_;  // where this client stages (--writeback), "" when it does not
  bool session_open_ = false;
  bool background_started_ = false;
  std::unique_ptr<Meta> meta_;
  std::unique_ptr<CachedStore> cached_;
  std::unique_ptr<OwnerGuard> owner_;
  std::unique_ptr<GroupRuntime> group_;
  std::unique_ptr<WritebackMarks> marks_;
  std::unique_ptr<BackupLoop> backups_;
  std::unique_ptr<metrics::Exporter> exporter_;
  std::unique_ptr<Vfs> vfs_;
};

}  // namespace tierfs::client
