// Drops what the kernel caches of other clients' changes as the metadata engine pushes
// them (meta/change_watch.h: etcd's watch, Redis's published commits): a changed inode's
// attributes (FUSE_NOTIFY_INVAL_INODE with offset -1: attributes and ACLs, never pages,
// which stay close-to-open) and a changed name (FUSE_NOTIFY_INVAL_ENTRY, positive or
// negative). With it a mount may cache attributes and names for long (--attr-cache,
// --entry-cache, --dir-entry-cache) and still see another client's chmod, rename or new
// file within milliseconds. SQLite and PostgreSQL volumes with the change log on are
// watched by polling the log (meta/change_log_watch.h: within about 0.1 s); engines that
// cannot watch get nothing of this (the kernel's timeouts alone, as before);
// `mount --no-meta-watch` turns it off.
//
// When the engine says changes were missed (its watch was cut and resumed without the
// gap's history), every name the kernel caches is dropped at once (FUSE_NOTIFY_INC_EPOCH,
// Linux 6.16+; each is looked up again, with fresh attributes, before its next use); on
// older kernels the timeouts cover the gap. Attributes the kernel holds for open files
// reached without a lookup (fstat) are not dropped by it: they expire by --attr-cache.
//
// The attributes of an inode this client has open are never dropped this way: the kernel
// discards a GETATTR answer that crosses such a notification (its attr_version moved) and
// then positions an O_APPEND write or an lseek(SEEK_END) by the size it had before, so two
// clients appending under flock overwrote each other's lines. Open files are close-to-open
// anyway, and a lock taken here refreshes them (fuse_locks.cc).
//
// Threads: the engine's watch thread only queues; one notifier thread writes the
// notifications on a duplicate of the FUSE device of its own, because the kernel holds an
// entry notification back while the directory's lock is taken (a request in it being
// served): such a wait must never hold up the engine's stream, nor the session's end (the
// notifier is left to finish alone then; the process's exit closes its descriptor). The
// queue is bounded (65536 changes): past it, the queue is replaced by dropping every name
// as above.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

struct fuse_session;

namespace tierfs {

class KvEngine;

class RemoteInvalidation {
 public:
  // Starts watching engine; null when the engine cannot (logged at debug level). root: the
  // volume's inode the kernel knows as its root (--subdir). open_here: whether this client
  // has the inode open; such an inode's attributes are not dropped (see above).
  static std::unique_ptr<RemoteInvalidation> Start(KvEngine* engine, fuse_session* se, uint64_t root,
                                                   std::function<bool(uint64_t)> open_here);
  // Stops the watch (no change is queued after it) and the notifier.
  ~RemoteInvalidation();

  struct Notifier;

 private:
  RemoteInvalidation(KvEngine* engine, std::shared_ptr<Notifier> n) : engine_(engine), n_(std::move(n)) {}
  KvEngine* engine_;
  std::shared_ptr<Notifier> n_;
};

}  // namespace tierfs
