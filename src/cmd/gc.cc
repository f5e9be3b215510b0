// tierfs gc META-URL [--delete] [--min-age 1h] [--json]: report, and with --delete remove,
// block and pack objects no file refers to, carry out pending deletions, and rewrite packs
// that are mostly dead.
#include <CLI/CLI.hpp>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/bucket_claim.h"
#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "cmd/gc_cache.h"
#include "client/metrics_setup.h"
#include "cmd/util.h"
#include "common/size.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/bucket_owner.h"
#include "tools/gc.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string metrics;  // --metrics ADDR:PORT while it runs ("": none)
  std::string meta_url, min_age = "1h", repack_grace = "10m";
  double repack_below = 0.5;
  bool delete_garbage = false, json = false;
  bool cache = false;  // --cache: the local cache directories' volume folders instead
  std::string cache_dir, unused = "30d";
};

// "90", "90s", "15m", "1h", "2d" -> nanoseconds.
Result<int64_t> ParseAge(const std::string& text, const std::string& option) {
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  std::string unit(end ? end : "");
  double mult = 1;
  if (unit.empty() || unit == "s") mult = 1;
  else if (unit == "m") mult = 60;
  else if (unit == "h") mult = 3600;
  else if (unit == "d") mult = 86400;
  else return Status::Err(EINVAL, "bad " + option + " '" + text + "': expected a number with s, m, h or d");
  if (end == text.c_str() || v < 0 || v * mult > 1e9 * 3600) {
    return Status::Err(EINVAL, "bad " + option + " '" + text + "': expected a number of seconds, minutes (m), "
                               "hours (h) or days (d), not negative");
  }
  return static_cast<int64_t>(v * mult * 1e9);
}

int RunCache(const Args& a) {
  CacheGcArgs c;
  c.cache_dir = a.cache_dir;
  c.remove = a.delete_garbage;
  c.json = a.json;
  c.unused_text = a.unused;
  auto unused = ParseAge(a.unused, "--unused");
  if (!unused.ok()) return Fail("gc --cache", unused.status());
  c.unused_ns = *unused;
  if (!a.meta_url.empty()) {
    auto meta = OpenVolume(a.meta_url, true);
    if (!meta.ok()) return Fail("gc --cache", meta.status());
    c.keep_uuid = (*meta)->format().uuid;
  }
  return RunCacheGc(c);
}

// What compaction replaced and the grace keeps for readers still using the old layout: the
// slices whose deletion time lies ahead (X keys).
std::string HeldLine(const GcReport& r) {
  if (r.held_slices == 0) return "none";
  time_t until = static_cast<time_t>(r.held_until_ns / 1000000000);
  struct tm tm;
  localtime_r(&until, &tm);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", &tm);
  return std::to_string(r.held_slices) + " slices (" + FormatSize(r.held_bytes) +
         ") replaced by compaction, kept for readers of the old layout (mount --compact-grace) until " + when +
         "; deleted after that by any mounted client or `tierfs gc --delete`";
}

int Run(const Args& a) {
  if (a.cache) return RunCache(a);
  if (a.meta_url.empty()) return Fail("gc", Status::Err(EINVAL, "give the volume's META-URL (or --cache)"));
  auto age = ParseAge(a.min_age, "--min-age");
  if (!age.ok()) return Fail("gc", age.status());
  auto grace = ParseAge(a.repack_grace, "--repack-grace");
  if (!grace.ok()) return Fail("gc", grace.status());
  auto meta = OpenVolume(a.meta_url, false);
  if (!meta.ok()) return Fail("gc", meta.status());
  const bool mirror = !(*meta)->format().mirror_of.empty();
  if (a.delete_garbage && mirror && (*meta)->format().source_storage.empty()) {
    // The store is the primary's: what it holds is the primary's to delete.
    return Fail("gc", Status::Err(EROFS, "volume " + (*meta)->format().name + " is a mirror of " +
                                             (*meta)->format().mirror_of +
                                             " sharing its object store: --delete runs on the primary; run without "
                                             "--delete for a report"));
  }
  const FormatRecord& f = (*meta)->format();
  // A mirror's store opens reading through to the primary's; listings and deletes are its
  // own store's alone (object/read_through_store.h).
  auto store = OpenStore(f);
  if (!store.ok()) return Fail("gc", store.status());
  if (a.delete_garbage) {
    // Deleting is for the engine that owns the objects, never for a copy (tierfs load).
    auto owner = OwnBucketFor((*meta)->engine(), store->get(), f, a.meta_url, "gc --delete");
    if (!owner.ok()) return Fail("gc", owner.status());
  } else {
    BucketOwner other;
    auto own = CheckBucketOwner((*meta)->engine(), store->get(), f, /*claim=*/false, &other);
    if (own.ok() && *own == Ownership::kOther) {
      std::cerr << "gc: note: this engine is a copy of the volume; the objects belong to " << other.engine
                << ", so objects written there since the copy count as leaked here (`gc --delete` refuses)" << std::endl;
    }
  }
  auto exporter = StartCommandMetrics(a.metrics, f.name, "gc");
  if (!exporter.ok()) return Fail("gc", exporter.status().With("--metrics"));
  GcOptions opts;
  opts.delete_garbage = a.delete_garbage;
  opts.min_age_ns = *age;
  opts.repack_below = a.repack_below;
  opts.repack_grace_ns = *grace;
  opts.mirror = mirror;
  opts.progress = [](const std::string& m) { std::cerr << "gc: " << m << std::endl; };
  auto r = CollectGarbage(meta->get(), store->get(), opts);
  if (!r.ok()) return Fail("gc", r.status());
  if (a.json) {
    nlohmann::json j = {{"objects", r->objects},       {"object_bytes", r->object_bytes},
                        {"referenced", r->referenced}, {"leaked", r->leaked},
                        {"leaked_bytes", r->leaked_bytes}, {"young", r->young},
                        {"pending", r->pending},       {"pending_slices", r->pending_slices},
                        {"foreign", r->foreign},       {"deleted", r->deleted},
                        {"leaked_keys", r->leaked_keys},
                        {"pack_objects", r->pack_objects}, {"pack_object_bytes", r->pack_object_bytes},
                        {"packs_live", r->packs_live}, {"packs_pending", r->packs_pending},
                        {"packs_sparse", r->repack.sparse}, {"packs_repacked", r->repack.repacked},
                        {"pack_live_bytes", r->repack.live_bytes}, {"repack_freed_bytes", r->repack.freed_bytes},
                        {"held_slices", r->held_slices}, {"held_bytes", r->held_bytes},
                        {"held_until", r->held_until_ns / 1000000000}};
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  std::cout << "objects:     " << r->objects << " (" << FormatSize(r->object_bytes) << ")\n"
            << "in use:      " << r->referenced << "\n"
            << "leaked:      " << r->leaked << " (" << FormatSize(r->leaked_bytes) << ")"
            << (a.delete_garbage ? ", deleted " + std::to_string(r->deleted) : std::string(", use --delete to remove"))
            << "\n"
            << "too young:   " << r->young << " (newer than --min-age " << a.min_age << ", left alone)\n"
            << "pending:     " << r->pending_slices - r->held_slices << " slices awaiting deletion ("
            << (a.delete_garbage ? "processed" : "use --delete to process now") << ")\n"
            << "held:        " << HeldLine(*r) << "\n"
            << "packs:       " << r->pack_objects << " (" << FormatSize(r->pack_object_bytes) << "), "
            << r->packs_live << " in use holding " << FormatSize(r->repack.live_bytes) << ", " << r->packs_pending
            << " awaiting deletion\n"
            << "sparse packs: " << r->repack.sparse << " under " << a.repack_below * 100 << "% live"
            << (a.delete_garbage ? ", rewritten " + std::to_string(r->repack.repacked) + " (" +
                                       FormatSize(r->repack.freed_bytes) + " freed after --repack-grace)"
                                 : std::string(", use --delete to rewrite them"))
            << "\n"
            << "not blocks:  " << r->foreign << "\n";
  for (const auto& k : r->leaked_keys) std::cout << "  leaked " << k << "\n";
  return 0;
}

}  // namespace

void RegisterGc(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("gc", "Find (and with --delete remove) objects no file refers to");
  sub->add_option("META-URL", a->meta_url, "Metadata engine of the volume (with --cache: optional, its folder is kept)");
  AddCommandMetricsOption(sub, &a->metrics);
  sub->add_flag("--delete", a->delete_garbage, "Delete leaked objects and carry out pending deletions");
  sub->add_option("--min-age", a->min_age, "Never touch objects younger than this (s, m, h, d)")
      ->capture_default_str();
  sub->add_flag("--json", a->json, "Print the report as JSON");
  sub->add_option("--repack-below", a->repack_below,
                  "With --delete: rewrite packs of small files whose live share is below this (0: never)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--repack-grace", a->repack_grace,
                  "How long a rewritten pack's old object stays for readers still using it (s, m, h, d)")
      ->capture_default_str();
  sub->add_flag("--cache", a->cache,
                "Instead: list the volume folders in local disk cache directories; with --delete remove those "
                "unused for --unused, never one in use or holding staged writes");
  sub->add_option("--cache-dir", a->cache_dir, "With --cache: the cache directories DIR[:DIR...] (default: the mount's)");
  sub->add_option("--unused", a->unused, "With --cache: folders unused for this long may go (s, m, h, d)")
      ->capture_default_str();
  sub->callback([a, exit_code] { *exit_code = Run(*a); });
}

}  // namespace tierfs::cmd
