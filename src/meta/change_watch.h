// What other clients change in the namespace, pushed by engines that can watch
// (KvEngine::Watch: etcd, Redis, and the change log's poller: meta/change_log_watch.h), as the inodes and names it concerns: the FUSE client uses it to
// drop what the kernel caches of them (fuse/remote_invalidation.h), so that the kernel may
// cache attributes and names for long and still see another client's change within
// milliseconds instead of after --attr-cache / --entry-cache seconds.
//
// Only attributes and names are reported (what the kernel caches by timeout); data is
// close-to-open as on every engine: an open or a lock finds another client's writes.
// An engine's own commits are not reported (the etcd engine skips the revisions of its own
// commits), so a client never drops its own fresh entries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "meta/types.h"

namespace tierfs {

class KvEngine;

struct MetaChange {
  enum Kind { kAttr, kEntry } kind = kAttr;
  Ino ino = 0;       // kAttr: the inode whose attributes (or ACLs, xattrs) changed
  Ino parent = 0;    // kEntry: the directory whose entry `name` was added, removed or replaced
  std::string name;  // kEntry
};

// changes: one commit's worth, in commit order. all: changes may have been missed (the
// watch was lost and could not resume): whatever is cached may be stale.
using MetaChangeFn = std::function<void(const std::vector<MetaChange>& changes, bool all)>;

// Starts the engine's watch (ENOTSUP from engines that cannot); fn runs on the engine's
// watch thread. StopWatchingMetaChanges returns after fn's last call.
Status WatchMetaChanges(KvEngine* engine, MetaChangeFn fn);
void StopWatchingMetaChanges(KvEngine* engine);

// The changes a commit's keys mean (exposed for tests).
std::vector<MetaChange> MetaChangesOfKeys(const std::vector<std::string>& keys);

}  // namespace tierfs
