// The metrics of a mount or cache server (`--metrics ADDR:PORT`): the process's registry
// labelled with the volume and mount point, collectors of the cache and store counters, and
// the HTTP exporter.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "metrics/exporter.h"

namespace tierfs {
class CachedStore;
}

namespace tierfs::client {

inline constexpr const char* kDefaultMetricsAddr = "127.0.0.1:9567";

// Registers the collectors and starts serving; null (collectors registered, nothing served)
// when addr is "" or "0". The collectors
// read `store`, which must outlive the exporter.
Result<std::unique_ptr<metrics::Exporter>> StartMetrics(const std::string& addr, const std::string& volume,
                                                         const std::string& mountpoint, CachedStore* store);

// For a command that runs long (gc, fsck, dump, load, destroy): serves its metrics while it
// runs (mount point label: the command's name) and says where on stderr; null when addr is
// "".
Result<std::unique_ptr<metrics::Exporter>> StartCommandMetrics(const std::string& addr, const std::string& volume,
                                                                const std::string& command);

}  // namespace tierfs::client
