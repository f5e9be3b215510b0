// The command-line options of the client library's settings (src/client) that several
// subcommands share: the caches and --io-timeout (mount, cache-server, gateway), the cache
// group (mount, cache-server) and --metrics of one-shot commands.
#pragma once

#include <string>

#include "client/cache_setup.h"
#include "client/group_member.h"

namespace CLI {
class App;
}

namespace tierfs::cmd {

// --io-timeout, --cache-dir, --cache-size, --free-space-ratio, --mem-cache-size,
// --cache-writes, into *args.
void AddCacheOptions(CLI::App* sub, client::CacheArgs* args);
// --cache-group, --group-addr, --no-sharing, into *args.
void AddGroupOptions(CLI::App* sub, client::GroupArgs* args);
// --metrics ADDR:PORT of a command that runs long (gc, fsck, dump, load, destroy), into *addr
// (client::StartCommandMetrics serves them).
void AddCommandMetricsOption(CLI::App* sub, std::string* addr);

}  // namespace tierfs::cmd
