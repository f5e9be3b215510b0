// tierfs umount MOUNTPOINT [--force] [--wait SECONDS]
//
// Unmounts, then waits for the client that served the mount to commit what it still
// buffers and close its session, so that a script may stop the machine, detach the disk
// under a local bucket or run `tierfs fsck` as soon as umount returns.
#include <dirent.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <chrono>
#include <cstring>
#include <iostream>
#include <string_view>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"

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

// False when pid certainly has no FUSE device open. The client reports its pid as its
// own pid namespace sees it; from another namespace (a client in a container) the number
// names some unrelated process, or none.
bool ServesFuse(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return errno == EACCES;  // not ours to inspect: take the client's word
  bool found = false;
  while (dirent* e = readdir(d)) {
    char target[64];
    ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
    if (n > 0 && std::string_view(target, static_cast<size_t>(n)) == "/dev/fuse") {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

// A descriptor that becomes readable when the client serving mp exits, or -1 when it
// cannot be told which process that is (not TierFS, a client that already left, or one in
// another pid namespace).
int WatchClient(const std::string& mp, pid_t* pid) {
  char buf[32] = {0};
  ssize_t n = getxattr(mp.c_str(), "tierfs.pid", buf, sizeof buf - 1);
  if (n <= 0) return -1;
  *pid = static_cast<pid_t>(atol(buf));
  if (*pid <= 0) return -1;
  int fd = static_cast<int>(syscall(SYS_pidfd_open, *pid, 0));
  // Checked after pinning the process with the pidfd, so the pid cannot change meanwhile.
  if (fd >= 0 && !ServesFuse(*pid)) {
    close(fd);
    return -1;
  }
  return fd;
}

// Bytes the client has staged for write-back and not yet uploaded (0 without write-back).
uint64_t StagedBytes(const std::string& mp) {
  std::string buf(1 << 16, '\0');
  ssize_t n = getxattr(mp.c_str(), "tierfs.stats", buf.data(), buf.size());
  if (n <= 0) return 0;
  auto j = nlohmann::json::parse(buf.substr(0, static_cast<size_t>(n)), nullptr, false);
  if (!j.is_object() || !j.contains("writeback")) return 0;
  return j["writeback"].value("staged_bytes", uint64_t{0});
}

int WaitForClient(int pidfd, pid_t pid, int wait_s, uint64_t staged) {
  auto start = std::chrono::steady_clock::now();
  bool told = false;
  if (staged > 0) {
    std::cerr << "tierfs: the client (pid " << pid << ") uploads " << FormatSize(staged)
              << " staged for write-back before it exits\n";
    told = true;
  }
  for (;;) {
    pollfd p{pidfd, POLLIN, 0};
    if (poll(&p, 1, 1000) > 0) break;
    auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
    if (!told && waited >= 2) {
      std::cerr << "tierfs: waiting for the client (pid " << pid << ") to commit buffered writes\n";
      told = true;
    }
    if (waited >= wait_s) {
      close(pidfd);
      std::string what = staged > 0 ? "committing buffered writes and uploading blocks staged for write-back (" +
                                          FormatSize(staged) +
                                          " at the unmount; if it is stopped they are uploaded at the next mount)"
                                    : "committing buffered writes";
      return Fail("umount", Status::Err(ETIMEDOUT, "unmounted, but the client (pid " + std::to_string(pid) +
                                                       ") is still " + what + " after " + std::to_string(wait_s) +
                                                       " s; see its log"));
    }
  }
  close(pidfd);
  return 0;
}

// The unmount itself: umount2 as root, fusermount3 otherwise.
int Unmount(const std::string& mp, bool force) {
  if (geteuid() != 0) {
    if (RunProgram({"fusermount3", force ? "-uz" : "-u", mp}) == 0) return 0;
    return Fail("umount", Status::Err(EIO, "fusermount3 could not unmount " + mp));
  }
  if (umount2(mp.c_str(), force ? MNT_DETACH : 0) == 0) return 0;
  int err = errno;
  if (err == EBUSY && !force) {
    return Fail("umount", Status::Err(EBUSY, mp + " is busy (files open or a process inside it); close them or use --force"));
  }
  return Fail("umount", Status::Err(err, std::string("unmounting ") + mp + " failed: " + strerror(err)));
}

int Run(const std::string& mountpoint, bool force, int wait_s) {
  std::string mp = AbsPath(mountpoint);
  if (!IsMountPoint(mp)) return Fail("umount", Status::Err(EINVAL, mp + " is not mounted"));
  // A lazy unmount leaves the client serving the files still open: nothing to wait for.
  pid_t pid = 0;
  int pidfd = force ? -1 : WatchClient(mp, &pid);
  uint64_t staged = pidfd < 0 ? 0 : StagedBytes(mp);
  int rc = Unmount(mp, force);
  if (pidfd < 0) return rc;
  if (rc == 0) return WaitForClient(pidfd, pid, wait_s, staged);
  close(pidfd);
  return rc;
}

}  // namespace

void RegisterUmount(CLI::App& app, int* exit_code) {
  auto mp = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto wait_s = std::make_shared<int>(600);
  auto* sub = app.add_subcommand("umount", "Unmount a TierFS mount point");
  sub->add_option("MOUNTPOINT", *mp, "Mount point")->required();
  sub->add_flag("--force", *force, "Detach even when busy (lazy unmount); does not wait for the client");
  sub->add_option("--wait", *wait_s,
                  "Seconds to wait for the client to commit buffered writes and exit after the unmount")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->callback([mp, force, wait_s, exit_code] { *exit_code = Run(*mp, *force, *wait_s); });
}

}  // namespace tierfs::cmd
