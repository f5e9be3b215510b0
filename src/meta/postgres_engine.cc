#include "meta/postgres_engine.h"

#include <cerrno>

namespace tierfs {

Result<std::unique_ptr<KvEngine>> OpenPostgresEngine(const Url&) {
  return Status::Err(EPROTONOSUPPORT, "postgres metadata engine is not available in this build");
}

}  // namespace tierfs
