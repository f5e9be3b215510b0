// tierfs summary PATH [--json]: the bytes, files and directories of a tree of a mounted
// volume, counted by the mount from metadata (batched reads, no stat of every file through
// the kernel), driven in steps through the "tierfs.summary" virtual xattr so that a progress
// line can be shown. A file with several links counts once, as du counts it.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"

namespace tierfs::cmd {
namespace {

int Run(const std::string& path, bool json) {
  const bool tty = isatty(STDERR_FILENO) && !json;
  std::string xattr = "tierfs.summary";
  nlohmann::json j;
  for (;;) {
    auto r = AskMount(path, xattr.c_str());
    if (!r.ok()) {
      if (tty) std::cerr << "\n";
      return Fail("summary", r.status());
    }
    j = nlohmann::json::parse(*r, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Fail("summary", Status::Err(EIO, "the mount returned a malformed answer"));
    if (tty) {
      std::cerr << "\r" << path << ": " << j.value("files", uint64_t{0}) << " files, " << j.value("dirs", uint64_t{0})
                << " directories, " << FormatSize(j.value("bytes", uint64_t{0})) << "\033[K" << std::flush;
    }
    if (j.value("done", false)) break;
    xattr = "tierfs.summary." + j.value("token", std::string());
  }
  if (tty) std::cerr << "\r\033[K" << std::flush;
  const uint64_t bytes = j.value("bytes", uint64_t{0}), allocated = j.value("allocated", uint64_t{0});
  const uint64_t files = j.value("files", uint64_t{0}), dirs = j.value("dirs", uint64_t{0});
  const uint64_t unreadable = j.value("unreadable", uint64_t{0});
  if (json) {
    std::cout << nlohmann::json{{"path", path},   {"bytes", bytes}, {"allocated", allocated},
                                {"files", files}, {"dirs", dirs},   {"unreadable", unreadable}}
                     .dump()
              << std::endl;
  } else {
    std::cout << path << ": " << FormatSize(bytes) << " (" << bytes << " bytes) in " << files << " files and " << dirs
              << " directories; " << FormatSize(allocated) << " allocated\n";
    if (unreadable > 0) {
      std::cout << "  " << unreadable << " directories not counted: no permission to read them\n";
    }
  }
  return unreadable > 0 ? 1 : 0;
}

}  // namespace

void RegisterSummary(CLI::App& app, int* exit_code) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand(
      "summary", "Bytes, files and directories of a tree of a mount, counted from metadata (hard links once)");
  sub->add_option("PATH", *path, "A directory (or file) in a TierFS mount")->required();
  sub->add_flag("--json", *json,
                "Print JSON: bytes (file lengths), allocated (bytes holding data), files (everything but "
                "directories), dirs (PATH included), unreadable (directories not walked)");
  sub->callback([=] { *exit_code = Run(*path, *json); });
}

}  // namespace tierfs::cmd
