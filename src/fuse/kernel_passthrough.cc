#include "fuse/kernel_passthrough.h"

#include <errno.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>

#include <cstring>

namespace tierfs::fuse_internal {
namespace {

struct BackingMap {  // struct fuse_backing_map
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kIocBackingOpen = _IOW(229, 1, BackingMap);
constexpr unsigned long kIocBackingClose = _IOW(229, 2, uint32_t);

}  // namespace

int BackingOpen(int dev_fd, int fd) {
  BackingMap map;
  memset(&map, 0, sizeof map);
  map.fd = fd;
  int id = ioctl(dev_fd, kIocBackingOpen, &map);
  return id < 0 ? -errno : id;
}

void BackingClose(int dev_fd, int backing_id) {
  uint32_t id = static_cast<uint32_t>(backing_id);
  if (ioctl(dev_fd, kIocBackingClose, &id) != 0) {
    spdlog::debug("closing FUSE backing file {}: {}", backing_id, strerror(errno));
  }
}

}  // namespace tierfs::fuse_internal
