// mount(8)'s external helper for type tierfs: `/sbin/mount.tierfs SPEC DIR [-sfnv] [-o
// OPTIONS]` (man 8 mount, EXTERNAL HELPERS), so that an fstab line
//
//   META-URL  /mnt/data  tierfs  _netdev,cache-dir=/nvme/tierfs  0 0
//
// and `mount /mnt/data` work. main.cc runs it when the binary is called as mount.tierfs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace CLI {
class App;
}

namespace tierfs::cmd {

// What a name in the options is to `tierfs mount`: not one of its long options (then it is
// a FUSE mount option, passed on with -o), a flag, or an option that takes a value.
enum class MountOptionKind { kUnknown, kFlag, kValue };
using MountOptionKindFn = std::function<MountOptionKind(const std::string& long_name)>;

struct MountHelperCommand {
  std::vector<std::string> args;  // for `tierfs mount` (without "tierfs mount")
  bool fake = false;              // -f: do everything but the mount
  bool verbose = false;           // -v
  std::string meta_password_file;  // meta-password-file=PATH: $TIERFS_META_PASSWORD_FILE
};

// Translates a mount.tierfs command line (argv without argv[0]) to `tierfs mount` arguments:
// `name=value` becomes `--name value` and a flag `name` becomes `--name` when `tierfs mount`
// has that long option (`_` may stand for `-`); `ro` becomes --read-only; the options that
// belong to mount(8) and fstab (defaults, auto, noauto, user, nouser, users, owner, group,
// nofail, _netdev, rw, comment=..., x-...) are dropped; any other option is a FUSE mount
// option and goes to -o. -d (background) is always added. EINVAL says what is wrong.
Result<MountHelperCommand> MountHelperArgs(const std::vector<std::string>& argv, const MountOptionKindFn& kind);

// main.cc, when the binary runs as mount.tierfs: rewrites args (argv, program name first)
// into `tierfs mount ...` for app. Returns -1 to go on with them, else the exit code.
int PrepareMountHelper(const CLI::App& app, std::vector<std::string>* args);

// The options of a mount in fstab form for `tierfs mount --update-fstab`: "_netdev", then
// each of `given` as it is ("name", "name=value" or a FUSE option). Values with a comma or
// whitespace cannot be written; EINVAL names them.
Result<std::string> FstabOptionsField(const std::vector<std::string>& given);

}  // namespace tierfs::cmd
