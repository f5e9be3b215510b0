// A KvEngine decorator that counts transactions in the process's metrics (metrics/metrics.h):
// latency by kind (read-only or read-write), and retries (a callback run again after a
// conflict with another transaction or a lost connection). Wraps the engine a command opens
// (cmd/util.cc OpenVolume).
#pragma once

#include <memory>

#include "meta/kv_engine.h"

namespace tierfs {

std::unique_ptr<KvEngine> WithTxnMetrics(std::unique_ptr<KvEngine> inner);

}  // namespace tierfs
