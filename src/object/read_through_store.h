// ReadThroughStore: a store that reads an object from a second store when the first lacks
// it. A mirror volume with a store of its own (mirror/replicator.h) opens its store
// through it, the primary's as the second: a block the replicator has not copied yet (or
// that was lost from the mirror's store) is read from the primary's region instead of
// failing. Both stores are ChecksumStores (CreateObjectStore), so a block read either way
// is verified.
//
// Only Get and Head fall through, only on ENOENT (any other error of the first store is its
// own: a failing mirror store is reported, not hidden), and only for keys `falls_through`
// accepts (a mirror: blocks and packs; the volume's other objects, such as its bucket-owner
// record, are each store's own). Everything else (writes,
// deletes, listings, Init, Space) is the first store's alone: the second is never written.
//
// WriteBoth::kYes (a mirror's client writing through its primary, mirror/forward_writes.h):
// the objects `falls_through` accepts are written to the second store first, then to the
// first (a failure there is logged and not returned: the object is where the primary's
// clients read it, and the replicator copies it later), and deleted from both (the second
// first); multipart uploads go to the second. The primary's store is the object's home.
//
// Threads: as the two stores.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "object/object_store.h"

namespace tierfs {

enum class WriteBoth { kNo, kYes };

std::unique_ptr<ObjectStore> WithReadThrough(std::unique_ptr<ObjectStore> first, std::unique_ptr<ObjectStore> second,
                                             std::function<bool(const std::string& key)> falls_through,
                                             WriteBoth write_both = WriteBoth::kNo);

}  // namespace tierfs
