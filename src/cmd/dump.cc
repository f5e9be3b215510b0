// tierfs dump META-URL FILE [--keep-secret-key] [--skip-damaged]: writes the whole volume's
// metadata as JSON (see meta/meta_dump.h); FILE "-" is standard output. A record that cannot
// be read makes it fail naming the record, writing no FILE (to standard output: a document
// cut short, which load refuses); with --skip-damaged it writes everything else and still
// exits 1, naming each record it left out.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>

#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "client/metrics_setup.h"
#include "cmd/util.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/timed_engine.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, file;
  bool keep_secrets = false, quiet = false, skip_damaged = false;
  std::string metrics;  // --metrics ADDR:PORT while it runs ("": none)
};

int Run(const Args& a) {
  auto engine = OpenKvEngine(a.meta_url, MissingDatabase::kMustExist);
  if (!engine.ok()) return Fail("dump", engine.status());
  *engine = WithTxnMetrics(std::move(*engine));
  auto fmt = Meta::ReadFormat(engine->get());  // for the label; DumpVolume reports a missing volume
  auto exporter = StartCommandMetrics(a.metrics, fmt.ok() ? fmt->name : (*engine)->Describe(), "dump");
  if (!exporter.ok()) return Fail("dump", exporter.status().With("--metrics"));
  std::ofstream file;
  std::ostream* out = &std::cout;
  std::string tmp = a.file + ".tmp";
  if (a.file != "-") {
    // A dump names every file of the volume (and may hold the secret key): private.
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (fchmod(fd, 0600) != 0) {
        // Not ours to change: the dump still goes there, as the user asked.
      }
      close(fd);
    }
    file.open(tmp, std::ios::binary | std::ios::trunc);
    if (!file) return Fail("dump", Status::Err(errno, "cannot create " + tmp + ": " + strerror(errno)));
    out = &file;
  }
  auto progress = [&](const DumpStats& s) {
    if (!a.quiet && a.file != "-") std::cerr << "\rdumped " << s.inodes << " inodes, " << s.entries << " entries, "
                                              << s.slices << " slices" << std::flush;
  };
  DumpStats stats;
  Status st = DumpVolume(engine->get(), *out, a.keep_secrets, progress, &stats, a.skip_damaged);
  // The dump read everything, and failed only for damaged records: with --skip-damaged it
  // is complete but for them.
  const bool damage_only = !st.ok() && stats.finished && !stats.damaged.empty();
  const bool partial = damage_only && a.skip_damaged;
  if (a.file != "-") {
    file.close();
    if ((st.ok() || partial) && !file) {
      st = Status::Err(EIO, "cannot write " + tmp);
    } else if ((st.ok() || partial) && rename(tmp.c_str(), a.file.c_str()) != 0) {
      st = Status::Err(errno, "cannot rename to " + a.file);
    } else if (st.ok() || partial) {
      tmp.clear();  // written
    }
    if (!tmp.empty()) unlink(tmp.c_str());
    if (!a.quiet) std::cerr << std::endl;
  }
  if (!damage_only || (a.file != "-" && !tmp.empty() && partial)) {
    if (!st.ok()) return Fail("dump", st);
  } else {
    // Every damaged record, one a line (the status names the first 20).
    std::cerr << "tierfs: dump: " << stats.damaged.size() << " damaged record(s) in " << (*engine)->Describe()
              << (partial ? ", left out of the dump:" : ":") << "\n";
    for (const DamagedRecord& d : stats.damaged) std::cerr << "  " << keys::Describe(d.key) << ": " << d.what << "\n";
    if (partial) {
      std::cerr << "tierfs: dump: everything else was written to " << a.file
                << "; a copy loads with `tierfs load --skip-dangling` (entries of inodes left out are dropped), "
                   "then run `tierfs fsck --repair` on it"
                << std::endl;
    } else {
      std::cerr << "tierfs: dump: " << (a.file == "-" ? "the document was cut short" : "nothing was written")
                << "; `tierfs fsck META-URL` shows the damage (and `--repair` removes damaged directory entries), "
                   "`tierfs dump --skip-damaged` writes everything else"
                << std::endl;
    }
    return 1;
  }
  if (!a.quiet && a.file != "-") {
    std::cerr << "dump of " << (*engine)->Describe() << " written to " << a.file << " (" << stats.inodes
              << " inodes, " << stats.entries << " entries, " << stats.slices << " slices"
              << (a.keep_secrets ? "; includes the secret key" : "; secret key left out") << ")" << std::endl;
  }
  return 0;
}

}  // namespace

void RegisterDump(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("dump", "Write a volume's whole metadata (namespace and layout) as JSON");
  sub->add_option("META-URL", args->meta_url, "Metadata engine of the volume")->required();
  sub->add_option("FILE", args->file, "Output file, or - for standard output")->required();
  sub->add_flag("--keep-secret-key", args->keep_secrets, "Include the object store's secret key");
  sub->add_flag("--skip-damaged", args->skip_damaged,
                "Write every record that can be read and leave out damaged ones (still exits 1, naming each); "
                "without it a damaged record makes the dump fail and write nothing");
  sub->add_flag("-q,--quiet", args->quiet, "No progress or summary");
  AddCommandMetricsOption(sub, &args->metrics);
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
