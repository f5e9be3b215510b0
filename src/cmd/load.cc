// tierfs load META-URL FILE [--force]: recreates a dumped volume in an empty engine, e.g. to
// move it from SQLite to Redis or PostgreSQL. The object store is untouched: the new engine
// points at the same bucket (change it with `tierfs config` if the data moved too). FILE may
// be a zstd-compressed metadata backup (`mount --backup-meta`, VOLUME/meta/ in the store).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "client/bucket_claim.h"
#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "client/metrics_setup.h"
#include "cmd/util.h"
#include "common/zstd_stream.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/timed_engine.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, file;
  bool force = false, quiet = false, skip_dangling = false, take_bucket = false;
  std::string metrics;  // --metrics ADDR:PORT while it runs ("": none)
};

// Returns with the engine closed.
int Load(const Args& a) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (a.file != "-") {
    file.open(a.file, std::ios::binary);
    if (!file) return Fail("load", Status::Err(errno, "cannot read " + a.file + ": " + strerror(errno)));
    in = &file;
  }
  // A metadata backup from the object store (`mount --backup-meta`) is zstd-compressed.
  std::istringstream unpacked;
  if (in->peek() == 0x28) {
    std::string raw((std::istreambuf_iterator<char>(*in)), std::istreambuf_iterator<char>());
    if (LooksLikeZstd(raw)) {
      auto doc = ZstdDecompress(raw);
      if (!doc.ok()) return Fail("load", doc.status().With(a.file));
      raw = std::move(doc).value();
    }
    unpacked.str(std::move(raw));
    in = &unpacked;
  }
  auto engine = OpenKvEngine(a.meta_url);
  if (!engine.ok()) return Fail("load", engine.status());
  *engine = WithTxnMetrics(std::move(*engine));
  // The volume is named inside the dump; the series are labelled with the engine instead.
  auto exporter = StartCommandMetrics(a.metrics, (*engine)->Describe(), "load");
  if (!exporter.ok()) return Fail("load", exporter.status().With("--metrics"));
  if (a.force) {
    Status st = (*engine)->Reset();
    if (!st.ok()) return Fail("load", st);
  }
  auto progress = [&](const DumpStats& s) {
    if (!a.quiet) std::cerr << "\rloaded " << s.inodes << " inodes, " << s.entries << " entries" << std::flush;
  };
  DumpStats stats;
  Status st = LoadVolume(engine->get(), *in, progress, &stats, a.skip_dangling);
  if (!a.quiet) std::cerr << std::endl;
  if (!st.ok()) return Fail("load", st);
  if (stats.dropped_entries) {
    std::cerr << "tierfs load: left out " << stats.dropped_entries << " directory entries whose inode the dump "
              << "lacks; run `tierfs fsck --repair` on the loaded volume" << std::endl;
  }
  if (!a.quiet) {
    std::cerr << "loaded " << stats.inodes << " inodes, " << stats.entries << " entries and " << stats.slices
              << " slices into " << (*engine)->Describe() << std::endl;
  }
  auto fmt = Meta::ReadFormat(engine->get());
  if (!fmt.ok()) return Fail("load", fmt.status());
  if (a.take_bucket) {
    Status st = TakeBucketAndSay(engine->get(), *fmt);
    if (!st.ok()) {
      return Fail("load", st.With("loaded, but taking over the objects failed; run `tierfs config " + a.meta_url +
                                  " --take-bucket` (with the store's credentials)"));
    }
    return 0;
  }
  // The copy points at the same objects as the engine it was dumped from, which owns them.
  std::cerr << "tierfs load: this copy shares the objects of volume " << fmt->name << " (" << fmt->storage << " "
            << fmt->bucket << ") with the engine it was dumped from, which owns them: it can be mounted read-only. "
            << "To move the volume here for good, stop using the other engine and run `tierfs config " << a.meta_url
            << " --take-bucket`" << std::endl;
  return 0;
}

int Run(const Args& a) {
  // A load that fails (a damaged dump) leaves no database file it created behind.
  NewDatabaseFile db(a.meta_url);
  int rc = Load(a);
  if (rc != 0) db.RemoveIfCreated();
  return rc;
}

}  // namespace

void RegisterLoad(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("load", "Recreate a dumped volume in an empty metadata engine");
  sub->add_option("META-URL", args->meta_url, "Metadata engine to load into (must be empty)")->required();
  sub->add_option("FILE", args->file, "Dump file, or - for standard input")->required();
  sub->add_flag("--force", args->force, "Erase whatever the engine holds first");
  sub->add_flag("-q,--quiet", args->quiet, "No progress or summary");
  AddCommandMetricsOption(sub, &args->metrics);
  sub->add_flag("--take-bucket", args->take_bucket,
                "Make the loaded engine the owner of the volume's objects (the engine the dump came from is no longer "
                "used: a migration, or a restore from a backup); without it the copy mounts read-only only");
  sub->add_flag("--skip-dangling", args->skip_dangling,
                "Leave out directory entries whose inode the dump lacks (a metadata backup taken while files were "
                "being deleted) instead of refusing the dump");
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
