#include "object/s3_store.h"

#include <cerrno>

namespace tierfs {

Result<std::unique_ptr<ObjectStore>> NewS3Store(const StorageSpec&) {
  return Status::Err(EPROTONOSUPPORT, "storage type s3 is not available in this build");
}

}  // namespace tierfs
