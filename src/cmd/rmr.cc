// tierfs rmr PATH... [--json]: removes directory trees of a mounted volume much faster than
// `rm -rf` through the mount: the mount removes many files per metadata transaction
// (Meta::RemoveContents), driven in steps through the "tierfs.rmr" virtual xattr so that a
// progress line can be shown; then the emptied directory is removed with rmdir(2).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/commands.h"
#include "cmd/util.h"

namespace tierfs::cmd {
namespace {

int Run(const std::vector<std::string>& paths, bool json) {
  uint64_t files = 0, dirs = 0;
  const bool tty = isatty(STDERR_FILENO) && !json;
  for (const std::string& path : paths) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      return Fail("rmr", Status::Err(errno, "cannot stat " + path + ": " + strerror(errno)));
    }
    if (!S_ISDIR(st.st_mode)) {  // a file: nothing to batch
      if (unlink(path.c_str()) != 0) return Fail("rmr", Status::Err(errno, path + ": " + strerror(errno)));
      files++;
      continue;
    }
    for (;;) {
      auto r = AskMount(path, "tierfs.rmr");
      if (!r.ok()) return Fail("rmr", r.status());
      auto j = nlohmann::json::parse(*r, nullptr, false);
      if (j.is_discarded()) return Fail("rmr", Status::Err(EIO, "the mount returned a malformed answer"));
      files += j.value("files", uint64_t{0});
      dirs += j.value("dirs", uint64_t{0});
      if (tty) std::cerr << "\r" << path << ": removed " << files << " files, " << dirs << " directories" << std::flush;
      if (j.value("done", false)) break;
    }
    if (rmdir(path.c_str()) != 0) {
      if (tty) std::cerr << "\n";
      return Fail("rmr", Status::Err(errno, "rmdir " + path + ": " + strerror(errno)));
    }
    dirs++;
  }
  if (tty) std::cerr << "\n";
  if (json) {
    std::cout << nlohmann::json{{"files", files}, {"dirs", dirs}}.dump() << std::endl;
  } else {
    std::cout << "removed " << files << " files and " << dirs << " directories\n";
  }
  return 0;
}

}  // namespace

void RegisterRmr(CLI::App& app, int* exit_code) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("rmr", "Remove directory trees of a mount fast (many files per metadata transaction)");
  sub->add_option("PATH", *paths, "Directories (or files) in a TierFS mount")->required();
  sub->add_flag("--json", *json, "Print the totals as JSON");
  sub->callback([=] { *exit_code = Run(*paths, *json); });
}

}  // namespace tierfs::cmd
