// tierfs compact PATH... [--json]: rewrites the fragmented chunks of files (or of every file
// in directory trees) of a mounted volume as few slices, so that their reads scan few
// records and their overwritten data leaves the object store. The mount does the work, per
// file, through the "tierfs.compact" virtual xattr (vfs/compactor.h); trees are walked
// with bounded memory at any depth (common/dir_walk.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/dir_walk.h"
#include "common/size.h"

namespace tierfs::cmd {
namespace {

int Run(const std::vector<std::string>& paths, bool json) {
  nlohmann::json total = {{"files", 0},           {"failed", 0},        {"chunks", 0},    {"compacted", 0},
                          {"conflicts", 0},       {"records_before", 0}, {"records_after", 0},
                          {"live_bytes", 0},      {"dead_bytes", 0}};
  std::string first_error;
  Status outside;  // the first file is outside TierFS: that says all there is to say
  uint64_t n = 0;
  Status walked = WalkRegularFiles(paths, [&](WalkFile f) {
    auto r = AskMount(f.Path(), "tierfs.compact");
    total["files"] = total["files"].get<uint64_t>() + 1;
    ++n;
    if (!r.ok()) {
      if (n == 1 && (r.status().code() == ENOTSUP || r.status().code() == ENODATA)) {
        outside = Status::Err(r.status().code(), f.Shown() + " is not in a TierFS mount");
        return false;
      }
      total["failed"] = total["failed"].get<uint64_t>() + 1;
      if (first_error.empty()) first_error = f.Shown() + ": " + r.status().message();
      return true;
    }
    auto j = nlohmann::json::parse(*r, nullptr, false);
    for (const char* k : {"chunks", "compacted", "conflicts", "records_before", "records_after", "live_bytes",
                          "dead_bytes"}) {
      total[k] = total[k].get<uint64_t>() + j.value(k, uint64_t{0});
    }
    if (isatty(STDERR_FILENO)) std::cerr << "\r" << n << " files" << std::flush;
    return true;
  });
  if (!outside.ok()) return Fail("compact", outside);
  if (!walked.ok()) return Fail("compact", walked);
  if (isatty(STDERR_FILENO) && n > 0) std::cerr << "\n";
  if (json) {
    std::cout << total.dump(2) << std::endl;
  } else {
    std::cout << total["files"].get<uint64_t>() << " files, " << total["chunks"].get<uint64_t>() << " chunks; "
              << total["compacted"].get<uint64_t>() << " chunks rewritten: " << total["records_before"].get<uint64_t>()
              << " records -> " << total["records_after"].get<uint64_t>() << ", "
              << FormatSize(total["live_bytes"].get<uint64_t>()) << " copied, "
              << FormatSize(total["dead_bytes"].get<uint64_t>()) << " of overwritten data freed\n";
    if (total["conflicts"].get<uint64_t>() > 0) {
      std::cout << total["conflicts"].get<uint64_t>() << " chunks changed while compacted; run again later\n";
    }
  }
  if (total["failed"].get<uint64_t>() > 0) {
    std::cerr << "tierfs: compact: " << total["failed"].get<uint64_t>() << " files failed; first: " << first_error
              << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterCompact(CLI::App& app, int* exit_code) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("compact", "Rewrite the fragmented chunks of files as few slices (frees overwritten data)");
  sub->add_option("PATH", *paths, "Files or directory trees in a TierFS mount")->required();
  sub->add_flag("--json", *json, "Print the totals as JSON");
  sub->callback([=] { *exit_code = Run(*paths, *json); });
}

}  // namespace tierfs::cmd
