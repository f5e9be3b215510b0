// An ObjectStore decorator that counts every request by kind in the process's metrics
// (metrics/metrics.h): latency histograms, errors, bytes in and out. CreateObjectStore puts
// it right over the backend, below the checksum and cache layers, so it counts what the
// backend is asked.
#pragma once

#include <memory>

#include "object/object_store.h"

namespace tierfs {

std::unique_ptr<ObjectStore> WithRequestMetrics(std::unique_ptr<ObjectStore> inner);

}  // namespace tierfs
