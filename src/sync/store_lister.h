// An object store's keys below a prefix as one stream in key order (a sync side's listing).
//
// threads <= 1, or a store that cannot list one level (RADOS, files: ObjectStore::ListLevel
// answers EOPNOTSUPP): one flat listing, a page of 1000 keys at a time.
// threads > 1: the first level below the prefix is listed with the delimiter '/'; the keys
// at that level come from it, and each prefix it names ("a/": every key below it, its
// marker included) is listed flat on its own. A pool of that many threads lists the next
// prefixes ahead of the stream (at most 4 per thread, each up to its first 1000 keys); the
// stream takes them in key order, so it is the same stream a flat listing gives, only
// sooner. Memory: 4 x threads x 1000 keys read ahead, plus a page of the level.
// A listing error is the stream's error, never a shorter stream.
#pragma once

#include <memory>
#include <string>

#include "object/object_store.h"
#include "sync/side.h"

namespace tierfs::sync {

// Keys are what follows prefix ("" or ending in '/'); keys >= start ("x\0": just after x).
std::unique_ptr<KeyStream> ListStore(ObjectStore* store, std::string prefix, std::string start, int threads);

}  // namespace tierfs::sync
