#include "object/rados_store.h"

#include <cerrno>

namespace tierfs {

Result<std::unique_ptr<ObjectStore>> NewRadosStore(const StorageSpec&) {
  return Status::Err(EPROTONOSUPPORT, "storage type rados is not available in this build");
}

}  // namespace tierfs
