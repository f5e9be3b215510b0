// FUSE passthrough (Linux 6.9+, CONFIG_FUSE_PASSTHROUGH): the kernel serves an open file's
// reads, and its mmap, from a backing file the daemon names at open, with no request to
// the daemon. libfuse 3.14 predates it, so this file speaks that part of the protocol:
//
//   INIT     the kernel offers FUSE_PASSTHROUGH (bit 37, in flags2 with FUSE_INIT_EXT); the
//            session's I/O (fuse/session_io.h) adds the flag and max_stack_depth 1 to
//            libfuse's INIT reply when passthrough is wanted.
//   BACKING  FUSE_DEV_IOC_BACKING_OPEN on the device registers an open file and returns its
//            id; FUSE_DEV_IOC_BACKING_CLOSE drops the id (an inode using the file keeps it).
//            The kernel allows it to CAP_SYS_ADMIN only: a mount by another user falls back.
//   OPEN     the reply's open_flags carry FOPEN_PASSTHROUGH and backing_id the id.
//
// Which kernels: 6.9 added passthrough reads and writes, 6.10 mmap. The kernel enforces one
// io mode per inode: while a file is open in passthrough mode every open of its inode
// must be passthrough onto the same backing file, and a passthrough open fails (EIO to the
// caller) while the inode is open in caching mode. PassthroughOpens (fuse/passthrough_opens.h)
// keeps the daemon's side of that rule.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tierfs::fuse_internal {

// Wire-format values newer than Debian 12's <linux/fuse.h>.
constexpr uint32_t kFopenPassthrough = 1u << 7;
constexpr uint32_t kFlags2Passthrough = 1u << (37 - 32);

struct FuseOpenOutV2 {  // fuse_open_out since protocol 7.40
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
};

// Registers fd (open for reading) with the kernel: the backing id (> 0), or a negative
// errno (EPERM without CAP_SYS_ADMIN, EOPNOTSUPP when not negotiated).
int BackingOpen(int dev_fd, int fd);
void BackingClose(int dev_fd, int backing_id);

}  // namespace tierfs::fuse_internal
