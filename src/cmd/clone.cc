// tierfs clone SRC DST: a copy of a file or directory tree of a mounted volume that shares
// its data (no byte is copied; later writes to either side do not show in the other). The
// mount does it (Meta::Clone) when the "tierfs.clone" virtual xattr is set on SRC.
#include <libgen.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/commands.h"
#include "cmd/util.h"

namespace tierfs::cmd {
namespace {

int Run(const std::string& src, const std::string& dst) {
  struct stat ss, ps;
  if (lstat(src.c_str(), &ss) != 0) return Fail("clone", Status::Err(errno, "cannot stat " + src + ": " + strerror(errno)));
  std::string d1 = dst, d2 = dst;
  std::string parent = dirname(d1.data());
  std::string name = basename(d2.data());
  if (name.empty() || name == "." || name == ".." || name == "/") {
    return Fail("clone", Status::Err(EINVAL, "give DST as a new path, not " + dst));
  }
  if (stat(parent.c_str(), &ps) != 0) {
    return Fail("clone", Status::Err(errno, "cannot stat " + parent + ": " + strerror(errno)));
  }
  if (ps.st_dev != ss.st_dev) return Fail("clone", Status::Err(EXDEV, src + " and " + dst + " are not in one mount"));
  std::string value = nlohmann::json{{"parent", static_cast<uint64_t>(ps.st_ino)}, {"name", name}}.dump();
  if (lsetxattr(src.c_str(), "tierfs.clone", value.data(), value.size(), 0) != 0) {
    int err = errno;
    if (err == ENOTSUP) return Fail("clone", Status::Err(err, src + " is not in a TierFS mount"));
    return Fail("clone", Status::Err(err, "clone " + src + " to " + dst + ": " + strerror(err)));
  }
  std::cout << "cloned " << src << " to " << dst << "\n";
  return 0;
}

}  // namespace

void RegisterClone(CLI::App& app, int* exit_code) {
  auto src = std::make_shared<std::string>();
  auto dst = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("clone", "Copy a file or tree of a mount without copying its data (copy-on-write)");
  sub->add_option("SRC", *src, "File or directory in a TierFS mount")->required();
  sub->add_option("DST", *dst, "New path in the same mount")->required();
  sub->callback([=] { *exit_code = Run(*src, *dst); });
}

}  // namespace tierfs::cmd
