// What the two POSIX sides (dir_side, volume_side) share when they write: the names a key
// splits into, the mode a new file gets without --perms, and the loop that pulls a copy's
// bytes from its Source.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "sync/side.h"

namespace tierfs::sync {

// "a/b/" -> "a/b"; "a/b" unchanged.
std::string TrimKey(const std::string& key);
// The key's directory ("" at the top) and last name, trailing '/' ignored.
std::string ParentKey(const std::string& key);
std::string BaseName(const std::string& key);

// Without --perms a new file or directory gets the source's permission bits less the
// umask (rsync's rule), or 0666/0777 less the umask when the source has none (stores).
mode_t DefaultMode(const Entry& e);

// Reads src.size bytes from src in 4 MiB pieces, tells src.on_bytes, and hands each piece
// to sink at its offset. A source shorter than listed fails with EAGAIN.
Status PumpSource(Source& src, const std::function<Status(uint64_t off, const char* data, size_t n)>& sink);

}  // namespace tierfs::sync
