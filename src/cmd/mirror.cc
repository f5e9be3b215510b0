// `tierfs mirror PRIMARY-META-URL MIRROR-META-URL`: makes and keeps a mirror volume
// (mirror/replicator.h); `tierfs mirror-wait MIRROR-META-URL --seq N`: waits until a mirror
// holds the primary's commit N (a job that wrote on the primary reads its output there).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/clock.h"
#include "client/metrics_setup.h"
#include "client/open.h"
#include "meta/mirror_state.h"
#include "metrics/exporter.h"
#include "metrics/metrics.h"
#include "mirror/replicator.h"

namespace tierfs::cmd {
namespace {

struct Args {
  mirror::ReplicatorOptions o;
  std::string storage, bucket, log, metrics;
  std::string access_key, secret_key, session_token, ceph_conf;
  bool json = false;
};

// The mirror's metrics: where it stands against the primary, and what it copied.
void AddMirrorMetrics(const mirror::Replicator* r) {
  metrics::Default().AddCollector([r](std::vector<metrics::CollectedFamily>* out) {
    const auto p = r->progress();
    const double lag_s = p.applied < p.primary_last && p.applied_ns > 0
                             ? std::max(0.0, static_cast<double>(NowNanos() - p.applied_ns) / 1e9)
                             : 0.0;
    auto gauge = [&](const char* name, const char* help, double v, const char* type = "gauge") {
      out->push_back(metrics::CollectedFamily{name, help, type, {metrics::Sample{name, {}, v}}});
    };
    gauge("tierfs_mirror_applied_seq", "The primary's last commit the mirror holds", static_cast<double>(p.applied));
    gauge("tierfs_mirror_lag_commits", "Commits of the primary the mirror does not hold yet",
          static_cast<double>(p.primary_last - std::min(p.primary_last, p.applied)));
    gauge("tierfs_mirror_lag_seconds", "Age of the mirror's state while it is behind (0: caught up)", lag_s);
    gauge("tierfs_mirror_block_lag_bytes", "Bytes of blocks the batch being applied still has to copy",
          static_cast<double>(p.block_lag_bytes));
    gauge("tierfs_mirror_records_total", "Change records applied", static_cast<double>(p.records), "counter");
    gauge("tierfs_mirror_copied_objects_total", "Objects copied into the mirror's store",
          static_cast<double>(p.objects), "counter");
    gauge("tierfs_mirror_copied_bytes_total", "Bytes copied into the mirror's store", static_cast<double>(p.bytes),
          "counter");
    gauge("tierfs_mirror_missing_objects_total", "Objects the primary no longer had when they were to be copied",
          static_cast<double>(p.missing), "counter");
  });
}

int Run(Args a) {
  if (a.storage.empty() != a.bucket.empty()) {
    return Fail("mirror", Status::Err(EINVAL, "--storage and --bucket go together (the mirror's own object store)"));
  }
  if (!a.storage.empty()) {
    a.o.store.storage = a.storage;
    a.o.store.bucket = a.storage == "file" ? client::AbsPath(a.bucket) : a.bucket;
    Status st = ResolveStorageCredentials(a.access_key, a.secret_key, a.session_token, a.ceph_conf, &a.o.store);
    if (!st.ok()) return Fail("mirror", st);
  }
  // SIGINT/SIGTERM end the run between two batches; a watcher thread turns them into `stop`.
  static std::atomic<bool> stop{false};
  const sigset_t sigs = BlockStopSignals();
  SetupLogging(a.log, true);
  auto r = mirror::Replicator::Open(a.o);
  if (!r.ok()) return Fail("mirror", r.status());
  std::unique_ptr<metrics::Exporter> exporter;
  if (!a.metrics.empty()) {
    AddMirrorMetrics(r->get());
    auto started = client::StartCommandMetrics(a.metrics, "", "mirror");
    if (!started.ok()) return Fail("mirror", started.status().With("--metrics"));
    exporter = std::move(*started);
  }
  std::thread watcher([sigs] {
    int sig = 0;
    sigwait(&sigs, &sig);
    stop = true;
  });
  watcher.detach();
  Status st = (*r)->Run(stop);
  const auto& s = (*r)->stats();
  if (a.json) {
    std::cout << nlohmann::json{{"seeded_keys", s.seeded_keys},
                                {"records", s.records},
                                {"batches", s.batches},
                                {"applied", s.applied},
                                {"objects", s.objects},
                                {"bytes", s.bytes},
                                {"missing", s.missing},
                                {"ok", st.ok()}}
                     .dump()
              << std::endl;
  } else {
    std::cerr << "tierfs: mirror: " << s.seeded_keys << " keys seeded, " << s.records << " commits applied in "
              << s.batches << " transactions; the mirror holds commit " << s.applied;
    if (s.objects || s.missing) std::cerr << "; " << s.objects << " objects (" << s.bytes << " bytes) copied";
    if (s.missing) std::cerr << ", " << s.missing << " no longer in the primary's store";
    std::cerr << std::endl;
  }
  if (!st.ok()) return Fail("mirror", st);
  return 0;
}

struct WaitArgs {
  std::string meta_url;
  uint64_t seq = 0;
  double timeout = 60;
};

int RunWait(const WaitArgs& a) {
  auto engine = OpenKvEngine(a.meta_url, MissingDatabase::kMustExist);
  if (!engine.ok()) return Fail("mirror-wait", engine.status());
  const int64_t deadline = MonoNanos() + static_cast<int64_t>(a.timeout * 1e9);
  for (;;) {
    auto st = ReadMirrorState(engine->get());
    if (!st.ok()) return Fail("mirror-wait", st.status());
    if (!*st) return Fail("mirror-wait", Status::Err(EINVAL, (*engine)->Describe() + " is not a mirror volume"));
    if (!(*st)->seeding && (*st)->applied >= a.seq) {
      std::cout << (*st)->applied << std::endl;
      return 0;
    }
    if (MonoNanos() > deadline) {
      return Fail("mirror-wait", Status::Err(ETIMEDOUT, "the mirror holds commit " + std::to_string((*st)->applied) +
                                                           (((*st)->seeding) ? " (still seeding)" : "") + ", not " +
                                                           std::to_string(a.seq) + ", after " +
                                                           std::to_string(a.timeout) + " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

void RegisterMirror(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "mirror", "Make a mirror volume of PRIMARY in MIRROR's engine and keep it following the primary's change log");
  sub->add_option("PRIMARY-META-URL", args->o.primary_url, "Metadata engine of the primary volume (its change log on)")
      ->required();
  sub->add_option("MIRROR-META-URL", args->o.mirror_url, "Metadata engine of the mirror (empty the first time)")
      ->required();
  sub->add_option("--batch", args->o.batch, "Primary commits applied per mirror transaction, at most")
      ->capture_default_str();
  sub->add_option("--interval", args->o.interval, "Seconds between looks at the primary once caught up")
      ->capture_default_str();
  sub->add_option("--lease-ttl", args->o.lease_ttl,
                  "Seconds the applying replicator's lease lasts; another takes over after it")
      ->capture_default_str();
  sub->add_flag("--once", args->o.once, "Catch up once, then exit");
  sub->add_flag("--reseed", args->o.reseed,
                "Copy the primary again from scratch (when its change log was trimmed past the mirror)");
  sub->add_option("--storage", args->storage,
                  "Object store of the mirror's own (file, s3, rados, azure), blocks copied into it; default: the "
                  "primary's store is shared. Given when the mirror is seeded");
  sub->add_option("--bucket", args->bucket, "Bucket (or directory, pool, container URL) of the mirror's own store");
  AddCredentialOptions(sub, &args->access_key, &args->secret_key, &args->session_token, &args->ceph_conf);
  sub->add_option("--threads", args->o.threads, "Objects copied at a time")->capture_default_str();
  sub->add_option("--metrics", args->metrics, "Serve Prometheus metrics on ADDR:PORT (lag, copies)");
  sub->add_option("--log", args->log, "Log file (default: stderr)");
  sub->add_flag("--json", args->json, "Print the summary as one JSON object");
  sub->callback([args, exit_code] { *exit_code = Run(*args); });

  auto wargs = std::make_shared<WaitArgs>();
  auto* w = app.add_subcommand("mirror-wait", "Wait until a mirror volume holds the primary's commit SEQ");
  w->add_option("MIRROR-META-URL", wargs->meta_url, "Metadata engine of the mirror")->required();
  w->add_option("--seq", wargs->seq, "The primary's commit (its change log's sequence number, `tierfs status`)")
      ->required();
  w->add_option("--timeout", wargs->timeout, "Seconds to wait at most")->capture_default_str();
  w->callback([wargs, exit_code] { *exit_code = RunWait(*wargs); });
}

}  // namespace tierfs::cmd
