// tierfs umount MOUNTPOINT [--force]
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>

#include "cmd/commands.h"
#include "cmd/util.h"

namespace tierfs::cmd {
namespace {

int RunProgram(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int Run(const std::string& mountpoint, bool force) {
  std::string mp = AbsPath(mountpoint);
  if (!IsMountPoint(mp)) return Fail("umount", Status::Err(EINVAL, mp + " is not mounted"));
  if (geteuid() == 0) {
    if (umount2(mp.c_str(), force ? MNT_DETACH : 0) == 0) return 0;
    int err = errno;
    if (err == EBUSY && !force) {
      return Fail("umount", Status::Err(EBUSY, mp + " is busy (files open or a process inside it); close them or use --force"));
    }
    return Fail("umount", Status::Err(err, std::string("unmounting ") + mp + " failed: " + strerror(err)));
  }
  int rc = RunProgram({"fusermount3", force ? "-uz" : "-u", mp});
  if (rc != 0) return Fail("umount", Status::Err(EIO, "fusermount3 could not unmount " + mp));
  return 0;
}

}  // namespace

void RegisterUmount(CLI::App& app, int* exit_code) {
  auto mp = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("umount", "Unmount a TierFS mount point");
  sub->add_option("MOUNTPOINT", *mp, "Mount point")->required();
  sub->add_flag("--force", *force, "Detach even when busy (lazy unmount)");
  sub->callback([mp, force, exit_code] { *exit_code = Run(*mp, *force); });
}

}  // namespace tierfs::cmd
