#include "cmd/client_options.h"

#include <CLI/CLI.hpp>

namespace tierfs::cmd {

using client::CacheArgs;
using client::GroupArgs;

void AddCacheOptions(CLI::App* sub, CacheArgs* a) {
  sub->add_option("--io-timeout", a->io_timeout,
                  "Seconds a read, write or close waits for an object store that does not answer (retries "
                  "included) before it fails with EIO")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  sub->add_option("--cache-dir", a->cache_dir,
                  "Disk cache directories, DIR[:DIR...], a folder per volume inside; 'memory' for none "
                  "(default: /var/cache/tierfs for root, ~/.cache/tierfs otherwise)");
  sub->add_option("--cache-size", a->cache_size, "Disk cache capacity over all its directories; 0 for none")
      ->capture_default_str();
  sub->add_option("--free-space-ratio", a->free_space_ratio,
                  "Keep at least this share of each cache disk free, evicting to stay above it")
      ->capture_default_str();
  sub->add_option("--mem-cache-size", a->mem_cache_size,
                  "Memory block cache, on top of --buffer-size (default: 2% of RAM, 256 MiB to 16 GiB)");
  sub->add_flag("--cache-writes", a->cache_writes,
                "Every written block enters the disk cache as it uploads (default: only small files' blocks)");
}

void AddGroupOptions(CLI::App* sub, GroupArgs* args) {
  sub->add_option("--cache-group", args->name,
                  "Join this cache group: members share their caches, each block is fetched from the store "
                  "once for the group");
  sub->add_option("--group-addr", args->addr,
                  "HOST:PORT the member listens on and advertises to the group (default: this host's "
                  "address toward the metadata server, an ephemeral port)");
  sub->add_flag("--no-sharing", args->no_sharing, "Read from the cache group but serve nothing to it");
}

void AddCommandMetricsOption(CLI::App* sub, std::string* addr) {
  sub->add_option("--metrics", *addr, "Serve Prometheus metrics at http://ADDR:PORT/metrics while it runs");
}

}  // namespace tierfs::cmd
