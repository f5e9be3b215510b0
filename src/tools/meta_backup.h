// Automatic metadata backups (`mount --backup-meta`): one client at a time (the one that
// claims the turn through the engine, Meta::ClaimBackup) dumps the whole namespace
// (meta/meta_dump.h) compressed with zstd into the object store, under
//
//   VOLUME/meta/dump-YYYYMMDD-HHMMSS.json.zst
//
// and deletes the oldest beyond `keep`. A backup that cannot read every record (damaged
// metadata: the dump fails naming them) writes nothing and deletes nothing, so the last
// complete backups stay; the failure is logged as an error on every attempt.
//
// The store given is the one under the checksum layer: a backup is a plain zstd file (its frame carries a checksum of the content), which
// any S3 tool, `rados get` or a copy from the bucket directory fetches when the metadata
// engine is gone; `tierfs load META-URL FILE` restores it (it reads zstd dumps as they are). The dump reads in batches of read transactions, so
// clients are never stalled; like `tierfs dump`, a backup taken while clients write is not
// one snapshot.
//
// Threads: BackupLoop runs its own thread; BackupMetadata from any one thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace tierfs {

class Meta;
class ObjectStore;

// Writes one backup now; returns its object key. Keeps the newest `keep` backups.
Result<std::string> BackupMetadata(Meta* meta, ObjectStore* store, int keep);
// The backups in the store, oldest first.
Result<std::vector<std::string>> ListMetadataBackups(ObjectStore* store, const std::string& volume);

class BackupLoop {
 public:
  // Every so often asks the engine whether this client's turn has come (the last backup of
  // any client is interval_s old); takes it and backs up. Logs failures and goes on.
  BackupLoop(Meta* meta, ObjectStore* store, int64_t interval_s, int keep);
  ~BackupLoop();

 private:
  void Run();
  Meta* meta_;
  ObjectStore* store_;
  const int64_t interval_s_;
  const int keep_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierfs
