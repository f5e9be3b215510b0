// tierfs cache-server META-URL --cache-group NAME [--cache-dir ...]: a cache-group member
// without a FUSE mount, for nodes whose NVMe only serves the group. It holds a session
// (so the group sees it and its heartbeat), a CachedStore with the usual caches, and the
// group's listener; it runs until SIGINT or SIGTERM.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <iostream>

#include "chunk/cached_store.h"
#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "client/group_member.h"
#include "client/metrics_setup.h"
#include "cmd/util.h"
#include "common/size.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "vfs/writeback_marks.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, log_file;
  CacheArgs cache;
  GroupArgs group;
  int download_threads = 16;
  std::string metrics;  // "": the default address, and no error when it cannot be used
};

int Run(const Args& a) {
  const sigset_t stop = BlockStopSignals();  // taken by sigwait below
  SetupLogging(a.log_file, true);
  if (a.group.name.empty()) return Fail("cache-server", Status::Err(EINVAL, "--cache-group is required"));
  if (a.group.no_sharing) return Fail("cache-server", Status::Err(EINVAL, "a cache server with --no-sharing serves nothing"));

  auto meta = OpenVolume(a.meta_url, false);
  if (!meta.ok()) return Fail("cache-server", meta.status());
  const FormatRecord& fmt = (*meta)->format();
  auto store = OpenStore(fmt, true, a.cache.io_timeout);
  if (!store.ok()) return Fail("cache-server", store.status());
  StoreConfig cfg;
  cfg.volume = fmt.name;
  cfg.block_size = fmt.block_size;
  cfg.download_threads = a.download_threads;
  Status st = ApplyCacheOptions(a.cache, fmt, &cfg);
  if (!st.ok()) return Fail("cache-server", st);
  auto cached = std::make_unique<CachedStore>(std::move(*store), cfg);
  LogCacheState(cached.get(), cfg);
  cached->SetStagedCheck(StagedCheckFor(meta->get()));

  st = (*meta)->NewSession(ThisProcessSession(""));
  if (!st.ok()) return Fail("cache-server", st);
  auto joined = JoinGroup(a.group, a.meta_url, meta->get(), cached.get());
  if (!joined.ok()) {
    (*meta)->CloseSession().ok();
    return Fail("cache-server", joined.status().With("--cache-group " + a.group.name));
  }
  std::unique_ptr<GroupRuntime> group = std::move(*joined);
  auto exporter = StartMetrics(a.metrics.empty() ? kDefaultMetricsAddr : a.metrics, fmt.name, "cache-server", cached.get());
  if (!exporter.ok() && a.metrics.empty()) {
    spdlog::warn("no metrics endpoint: {}", exporter.status().ToString());
    exporter = std::unique_ptr<metrics::Exporter>();
  }
  if (!exporter.ok()) {
    (*meta)->CloseSession().ok();
    return Fail("cache-server", exporter.status().With("--metrics"));
  }
  if (*exporter) spdlog::info("metrics on http://{}/metrics", (*exporter)->address());
  CachedStore* cs = cached.get();
  (*meta)->SetPackDeleter([cs](uint64_t pack, uint32_t len) { return cs->DeletePack(pack, len); });
  (*meta)->StartBackground([cs](uint64_t id, uint32_t size) { return cs->DeleteSlice(id, size); });
  // The line scripts wait for: the member is on the ring from now on.
  std::cout << "serving cache group " << a.group.name << " at " << group->StatsJson() << std::endl;

  int sig = 0;
  sigwait(&stop, &sig);
  spdlog::info("cache server stopping (signal {}): {}", sig, group->StatsJson());
  exporter->reset();
  // Nothing may outlive what it uses: the group's listener serves from `cached` and its
  // refresh thread reads cached's stats and writes the session, so both stop first; the
  // group object itself goes last (prefetches running in ~CachedStore may still ask it).
  group->Stop();
  (*meta)->StopBackground();
  st = (*meta)->CloseSession();
  if (!st.ok()) spdlog::warn("closing the session failed: {}", st.ToString());
  cached.reset();
  group.reset();
  spdlog::shutdown();
  return 0;
}

}  // namespace

void RegisterCacheServer(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("cache-server", "Serve a cache group from this node's caches, without a mount");
  sub->add_option("META-URL", a->meta_url, "Metadata engine of the volume")->required();
  sub->add_option("--log", a->log_file, "Log file (default: stderr)");
  AddCacheOptions(sub, &a->cache);
  AddGroupOptions(sub, &a->group);
  sub->add_option("--download-threads", a->download_threads, "Concurrent block downloads")->capture_default_str();
  sub->add_option("--metrics", a->metrics,
                  "Serve Prometheus metrics at http://ADDR:PORT/metrics (default 127.0.0.1:9567; the next free port "
                  "when taken; 0: off)");
  sub->callback([a, exit_code] {
    MakeCacheDirsAbsolute(&a->cache);
    *exit_code = Run(*a);
  });
}

}  // namespace tierfs::cmd
