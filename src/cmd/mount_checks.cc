#include "cmd/mount_checks.h"

#include <set>

namespace tierfs::cmd {

std::vector<std::string> SplitMountOptions(const std::vector<std::string>& o_values, bool* read_only,
                                           std::vector<std::string>* atime) {
  std::vector<std::string> out;
  for (const auto& o : o_values) {
    size_t pos = 0;
    while (pos <= o.size()) {
      size_t comma = o.find(',', pos);
      std::string one = o.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (one == "ro") {
        *read_only = true;
      } else if (one == "strictatime" || one == "relatime" || one == "atime") {
        // libfuse 3.14 does not know these; they are TierFS's to honour (vfs AtimeMode), and
        // FUSE inodes are S_NOATIME to the kernel anyway.
        if (atime) atime->push_back(one);
      } else if (!one.empty() && one != "rw") {
        out.push_back(one);
        if (one == "noatime" && atime) atime->push_back(one);
      }
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  return out;
}

Status CheckFuseOptions(const std::vector<std::string>& options) {
  // What libfuse 3's fuse_session_new and the kernel's FUSE mount accept; anything else
  // makes the session fail with only "invalid argument".
  static const std::set<std::string> kKnown = {
      "allow_other", "allow_root", "auto_unmount", "default_permissions", "blkdev", "fsname",  "subtype",
      "max_read",    "blksize",    "context",      "fscontext",           "defcontext", "rootcontext", "user",
      "ro",          "rw",         "suid",         "nosuid",              "dev",    "nodev",   "exec",
      "noexec",      "async",      "sync",         "dirsync",             "atime",  "noatime", "debug"};
  for (const std::string& o : options) {
    std::string name = o.substr(0, o.find('='));
    if (kKnown.count(name) > 0) continue;
    return Status::Err(EINVAL, "unknown mount option '" + o +
                                   "': neither a tierfs mount option (`tierfs mount --help`; in fstab written "
                                   "name=value) nor a FUSE one (allow_other, default_permissions, ro, nosuid, "
                                   "nodev, noexec, noatime, ...)");
  }
  return Status::OK();
}

Status CheckMountChoices(const MountChoices& c) {
  auto refuse = [](const std::string& m) { return Status::Err(EINVAL, m); };
  if (c.read_only && c.writeback) {
    return refuse("--writeback stages what is written, and a read-only mount (--read-only, -o ro) writes "
                  "nothing: leave out one of them");
  }
  if (!c.writeback && c.pack_below) {
    return refuse("--pack-below packs small files as --writeback uploads them; without --writeback every "
                  "file is uploaded as it closes and nothing is packed: add --writeback or leave out "
                  "--pack-below");
  }
  if (!c.writeback && c.upload_delay) {
    return refuse("--upload-delay holds staged blocks before their upload, which only --writeback stages: add "
                  "--writeback or leave out --upload-delay");
  }
  if (c.cache_in_memory && c.cache_writes) {
    return refuse("--cache-writes puts written blocks into the disk cache, and this mount has none "
                  "(--cache-dir memory or --cache-size 0): leave out one of them");
  }
  if (!c.cache_group && (c.group_addr || c.no_sharing)) {
    return refuse(std::string(c.group_addr ? "--group-addr" : "--no-sharing") +
                  " only applies to a cache group member: add --cache-group NAME or leave it out");
  }
  return Status::OK();
}

}  // namespace tierfs::cmd
