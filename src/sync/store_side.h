// An object store (S3, RADOS, Azure, or a file store's directory) below a prefix, as a
// sync side. Objects are written and read raw (no TierFS checksum header), so other tools
// read what sync wrote and the other way round. Keys ending in '/' are directory markers
// (zero-length objects, made with --dirs); other directories are only prefixes.
//
// Modification times are the store's (when an object was written, at 1 s precision for S3):
// an object is up to date when it has the source's size and is not older than the source.
// Large objects go up as one multipart upload whose parts are sent in parallel.
#pragma once

#include <memory>
#include <string>

#include "object/object_store.h"
#include "sync/side.h"

namespace tierfs::sync {

struct StoreSideOptions {
  uint64_t part_size = 16ull << 20;  // objects larger than this go up in parts of this size
  int part_threads = 4;              // parts of one object in flight at once
  // Parts of all objects in flight at once (0: no limit but part_threads per object). Each
  // holds a part's bytes, so this also bounds the memory of large copies.
  int parts_in_flight = 0;
};

// prefix is "" or ends in '/'.
std::unique_ptr<Side> NewStoreSide(std::unique_ptr<ObjectStore> store, std::string prefix,
                                   StoreSideOptions options = {});

}  // namespace tierfs::sync
