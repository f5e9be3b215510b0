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
#include "meta/mirror_state.h"
#include "mirror/replicator.h"

namespace tierfs::cmd {
namespace {

struct Args {
  mirror::ReplicatorOptions o;
  std::string storage, bucket, log;
  bool json = false;
};

int Run(const Args& a) {
  if (!a.storage.empty() || !a.bucket.empty()) {
    return Fail("mirror", Status::Err(ENOTSUP, "--storage/--bucket (blocks copied into a store of the mirror's own) "
                                              "are not built yet: a mirror shares the primary's object store"));
  }
  // SIGINT/SIGTERM end the run between two batches; a watcher thread turns them into `stop`.
  static std::atomic<bool> stop{false};
  const sigset_t sigs = BlockStopSignals();
  SetupLogging(a.log, true);
  auto r = mirror::Replicator::Open(a.o);
  if (!r.ok()) return Fail("mirror", r.status());
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
                                {"ok", st.ok()}}
                     .dump()
              << std::endl;
  } else {
    std::cerr << "tierfs: mirror: " << s.seeded_keys << " keys seeded, " << s.records << " commits applied in "
              << s.batches << " transactions; the mirror holds commit " << s.applied << std::endl;
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
  sub->add_option("--storage", args->storage, "Object store of the mirror's own (not built yet: the store is shared)");
  sub->add_option("--bucket", args->bucket, "Bucket of the mirror's own store (not built yet)");
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
