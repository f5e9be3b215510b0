// Small helpers shared by subcommands.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace tierfs {
class Meta;
}

namespace tierfs::cmd {

// Prints "tierfs: <message>" to stderr and returns 1.
int Fail(const std::string& what, const Status& st);
// Opens the engine at meta_url and the volume in it.
// dir_attr_cache_ns: see MetaOptions (0 for tools that must always read the engine).
Result<std::unique_ptr<Meta>> OpenVolume(const std::string& meta_url, bool read_only, int64_t dir_attr_cache_ns = 0);
// Absolute, normalized path (the path need not exist).
std::string AbsPath(const std::string& path);
// True when path is the mount point of a mounted file system (per /proc/self/mountinfo).
bool IsMountPoint(const std::string& abs_path);

}  // namespace tierfs::cmd
