#include "meta/redis_engine.h"

#include <cerrno>

namespace tierfs {

Result<std::unique_ptr<KvEngine>> OpenRedisEngine(const Url&) {
  return Status::Err(EPROTONOSUPPORT, "redis metadata engine is not available in this build");
}

}  // namespace tierfs
