// Redis metadata engine (stub: filled in by the redis engine work).
#pragma once

#include <memory>

#include "common/url.h"
#include "meta/kv_engine.h"

namespace tierfs {

Result<std::unique_ptr<KvEngine>> OpenRedisEngine(const Url& url);

}  // namespace tierfs
