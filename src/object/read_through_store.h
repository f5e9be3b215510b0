// ReadThroughStore: a store that reads an object from a second store when the first lacks
// it. A mirror volume with a store of its own (mirror/replicator.h) opens its store
// through it, the primary's as the second: a block the replicator has not copied yet (or
// that was lost from the mirror's store) is read from the primary's region instead of
// failing. Both stores are ChecksumStores (CreateObjectStore), so a block read either way
// is verified.
//
// Only Get and Head fall through, and only on ENOENT (any other error of the first store is
// its own: a failing mirror store is reported, not hidden). Everything else (writes,
// deletes, listings, Init, Space) is the first store's alone: the second is never written.
//
// Threads: as the two stores.
#pragma once

#include <memory>

#include "object/object_store.h"

namespace tierfs {

std::unique_ptr<ObjectStore> WithReadThrough(std::unique_ptr<ObjectStore> first, std::unique_ptr<ObjectStore> second);

}  // namespace tierfs
