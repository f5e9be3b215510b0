// S3 object storage backend (stub: filled in by the s3 backend work).
#pragma once

#include <memory>

#include "object/object_store.h"

namespace tierfs {

Result<std::unique_ptr<ObjectStore>> NewS3Store(const StorageSpec& spec);

}  // namespace tierfs
