// The bucket-owner checks of the subcommands that write or delete objects (tools/
// bucket_owner.h explains the marker): what they print and how they refuse.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace tierfs {
class KvEngine;
class ObjectStore;
class OwnerGuard;
struct FormatRecord;
}  // namespace tierfs

namespace tierfs::client {

// Before `action` (a read-write mount, gc --delete, upload-staged...) writes or deletes
// objects: OK when this engine owns the bucket (claiming a bucket nobody owns yet, and
// logging that), else EPERM naming the owner and the way to take it over. Returns the
// guard a running mount checks before each deletion.
Result<std::unique_ptr<OwnerGuard>> OwnBucketFor(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt,
                                                 const std::string& meta_url, const std::string& action);
// `config --take-bucket`, `load --take-bucket`: makes this engine the owner (opening the
// store the format record names) and prints what changed.
Status TakeBucketAndSay(KvEngine* engine, const FormatRecord& fmt);

}  // namespace tierfs::client
