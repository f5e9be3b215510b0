// Rados object storage backend (stub: filled in by the rados backend work).
#pragma once

#include <memory>

#include "object/object_store.h"

namespace tierfs {

Result<std::unique_ptr<ObjectStore>> NewRadosStore(const StorageSpec& spec);

}  // namespace tierfs
