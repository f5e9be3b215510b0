// tierfs dump META-URL FILE [--keep-secret-key]: writes the whole volume's metadata as JSON
// (see meta/meta_dump.h); FILE "-" is standard output.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>

#include "cmd/commands.h"
#include "cmd/mount_metrics.h"
#include "cmd/util.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/timed_engine.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, file;
  bool keep_secrets = false, quiet = false;
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
  Status st = DumpVolume(engine->get(), *out, a.keep_secrets, progress, &stats);
  if (a.file != "-") {
    file.close();
    if (st.ok() && !file) st = Status::Err(EIO, "cannot write " + tmp);
    if (st.ok() && rename(tmp.c_str(), a.file.c_str()) != 0) st = Status::Err(errno, "cannot rename to " + a.file);
    if (!st.ok()) unlink(tmp.c_str());
    if (!a.quiet) std::cerr << std::endl;
  }
  if (!st.ok()) return Fail("dump", st);
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
  sub->add_flag("-q,--quiet", args->quiet, "No progress or summary");
  AddCommandMetricsOption(sub, &args->metrics);
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
