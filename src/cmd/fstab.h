// `tierfs mount --update-fstab`: the fstab line of a mount, and its entry in /etc/fstab
// ($TIERFS_FSTAB overrides the path, for tests).
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace CLI {
class App;
}

namespace tierfs::cmd {

// The fstab path: $TIERFS_FSTAB, else /etc/fstab.
std::string FstabPath();

// The fstab line of a mount: META-URL (without a password: the file is readable by every
// user; a password from $TIERFS_META_PASSWORD_FILE becomes option meta-password-file=),
// the mount point, type tierfs, "_netdev" and every option given on the command line of
// `sub` in fstab form (mount.tierfs turns them back), "0 0". `resolved` holds the values
// to write instead of the given ones (absolute paths), by long name. Secrets never appear:
// the mount takes none as options. EINVAL when the line cannot carry the mount.
Result<std::string> FstabLineFor(const CLI::App& sub, const std::string& meta_url, const std::string& mountpoint,
                                 const std::map<std::string, std::string>& resolved);

// The mount's source, as /proc/mounts and df show it: the META-URL without its password,
// as an fstab line has it, so that `mount -a` sees the line is mounted and skips it (it
// compares sources and mount points); "tierfs:VOLUME" when the URL holds characters FUSE's
// option list cannot carry (a comma, whitespace, a backslash) or a password parameter.
std::string MountSource(const std::string& meta_url, const std::string& volume);

// Replaces the line for `mountpoint` in the fstab at `path` with `line` (the first such
// line; later ones for the same mount point go), or appends it; every other line stays as
// it was. The file is replaced atomically, with its mode and owner kept (0644 when new).
Status UpdateFstab(const std::string& path, const std::string& mountpoint, const std::string& line);

}  // namespace tierfs::cmd
