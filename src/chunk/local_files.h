// File helpers shared by the client's local directories (the disk cache, chunk/cache_dir.h,
// and the write-back staging area, chunk/staging.h): creating directories, whole reads and
// writes that survive short transfers and EINTR, and the per-directory lock that keeps
// two processes out of one directory.
//
// Pure functions over file descriptors; any thread.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace tierfs {

// mkdir -p: creates path and missing parents with mode; ENOTDIR when path is a file.
Status MkdirP(const std::string& path, mode_t mode);

// Full pread; returns bytes read (short only at the end of the file) or -1 (errno set).
ssize_t PreadFull(int fd, char* buf, size_t len, off_t off);

// Moves the vector past `done` bytes: whole entries are skipped (*idx advances), the first
// one left is shortened. With done 0 it skips leading empty entries.
void AdvanceIov(iovec* iov, int n, int* idx, size_t done);

// Writes a then b at the file's offset; false (errno set) on an error.
bool WriteFull(int fd, std::string_view a, std::string_view b);

// Takes the exclusive lock of DIR (the file DIR/lock, flock'ed, holding the holder's pid)
// and returns its descriptor, which holds the lock until closed. EBUSY names the holder:
// "DIR is in use by <holder> (pid N); <hint>".
Result<int> LockDirectory(const std::string& dir, const std::string& holder, const std::string& hint);

// fsync of a directory, so that the names created in it survive a power loss.
Status SyncDirectory(const std::string& dir);

}  // namespace tierfs
