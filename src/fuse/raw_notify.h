// Kernel cache notifications written straight to a FUSE device descriptor (a duplicate of
// the session's, so that a notification the kernel holds back while a directory's lock is
// taken blocks only its own thread, never the session or its end). Both return 0 or
// -errno; -ENOENT means the kernel does not hold that inode or name.
#pragma once

#include <cstdint>
#include <string_view>

namespace tierfs {

// FUSE_NOTIFY_INVAL_INODE with offset -1: the inode's attributes (and ACLs) only, never
// its pages.
int NotifyInvalAttrs(int fd, uint64_t kernel_ino);
// FUSE_NOTIFY_INVAL_ENTRY: the name, positive or negative, under kernel inode parent.
int NotifyInvalEntry(int fd, uint64_t parent, std::string_view name);
// FUSE_NOTIFY_INC_EPOCH (Linux 6.16+, protocol 7.44): every name the kernel caches,
// positive or negative, is looked up again before its next use (which refreshes the
// inode's attributes too). Older kernels refuse it with -EINVAL.
int NotifyIncEpoch(int fd);

}  // namespace tierfs
