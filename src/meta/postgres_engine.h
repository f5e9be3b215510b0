// Postgres metadata engine (stub: filled in by the postgres engine work).
#pragma once

#include <memory>

#include "common/url.h"
#include "meta/kv_engine.h"

namespace tierfs {

Result<std::unique_ptr<KvEngine>> OpenPostgresEngine(const Url& url);

}  // namespace tierfs
