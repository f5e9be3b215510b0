#include "fuse/raw_notify.h"

#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace tierfs {

int NotifyInvalAttrs(int fd, uint64_t kernel_ino) {
  fuse_out_header out{};
  fuse_notify_inval_inode_out arg{};
  arg.ino = kernel_ino;
  arg.off = -1;
  out.error = FUSE_NOTIFY_INVAL_INODE;
  out.len = sizeof out + sizeof arg;
  iovec iov[] = {{&out, sizeof out}, {&arg, sizeof arg}};
  return writev(fd, iov, 2) < 0 ? -errno : 0;
}

int NotifyInvalEntry(int fd, uint64_t parent, std::string_view name) {
  fuse_out_header out{};
  fuse_notify_inval_entry_out arg{};
  arg.parent = parent;
  arg.namelen = static_cast<uint32_t>(name.size());
  const char nul = '\0';
  out.error = FUSE_NOTIFY_INVAL_ENTRY;
  out.len = static_cast<uint32_t>(sizeof out + sizeof arg + name.size() + 1);
  iovec iov[] = {{&out, sizeof out},
                 {&arg, sizeof arg},
                 {const_cast<char*>(name.data()), name.size()},
                 {const_cast<char*>(&nul), 1}};
  return writev(fd, iov, 4) < 0 ? -errno : 0;
}

int NotifyIncEpoch(int fd) {
  constexpr int32_t kIncEpoch = 8;  // FUSE_NOTIFY_INC_EPOCH; Debian's headers predate it
  fuse_out_header out{};
  out.error = kIncEpoch;
  out.len = sizeof out;
  return write(fd, &out, sizeof out) < 0 ? -errno : 0;
}

}  // namespace tierfs
