#define FUSE_USE_VERSION 312
#include "fuse/kernel_passthrough.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "fuse/session_loop.h"

namespace tierfs::fuse_internal {
namespace {

struct BackingMap {  // struct fuse_backing_map
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kIocBackingOpen = _IOW(229, 1, BackingMap);
constexpr unsigned long kIocBackingClose = _IOW(229, 2, uint32_t);

std::atomic<bool> g_want{false};
std::atomic<uint64_t> g_init_unique{0};
std::atomic<bool> g_kernel_offers{false};
std::atomic<bool> g_negotiated{false};

ssize_t Read(int fd, void* buf, size_t len, void*) { return read(fd, buf, len); }

ssize_t Writev(int fd, iovec* iov, int count, void*) {
  const uint64_t init = g_init_unique.load();
  if (init != 0 && count >= 2 && iov[0].iov_len >= sizeof(fuse_out_header) &&
      iov[1].iov_len >= sizeof(fuse_init_out)) {
    const auto* h = static_cast<const fuse_out_header*>(iov[0].iov_base);
    if (h->unique == init && h->error == 0) {
      g_init_unique.store(0);
      if (g_want.load() && g_kernel_offers.load()) {
        fuse_init_out out;
        memcpy(&out, iov[1].iov_base, sizeof out);
        out.flags |= FUSE_INIT_EXT;
        out.flags2 |= kFlags2Passthrough;
        out.unused[0] = 1;  // max_stack_depth: backing files on non-stacked file systems
        iovec patched[2] = {iov[0], {&out, sizeof out}};
        g_negotiated.store(true);
        return writev(fd, patched, 2);
      }
    }
  }
  return writev(fd, iov, count);
}

}  // namespace

bool InstallPassthroughInit(fuse_session* se, bool want) {
  g_want.store(want);
  g_negotiated.store(false);
  if (!want) return true;
  fuse_custom_io io;
  memset(&io, 0, sizeof io);
  io.read = Read;
  io.writev = Writev;
  int rc = fuse_session_custom_io(se, &io, fuse_session_fd(se));
  if (rc != 0) {
    spdlog::warn("FUSE passthrough off: the session's I/O could not be set ({})", strerror(-rc));
    g_want.store(false);
    return false;
  }
  return true;
}

void NoteInitRequest(const RawRequest& r) {
  if (r.header->opcode != FUSE_INIT || r.arg_size < sizeof(fuse_init_in)) return;
  fuse_init_in in;
  memcpy(&in, r.arg, sizeof in);
  bool offers = (in.flags & FUSE_INIT_EXT) && (in.flags2 & kFlags2Passthrough);
  if (const char* f = getenv("TIERFS_FAULT_NO_KERNEL_PASSTHROUGH"); f && *f == '1' && offers) {
    spdlog::warn("TIERFS_FAULT_NO_KERNEL_PASSTHROUGH: the kernel's passthrough offer is ignored (tests only)");
    offers = false;
  }
  g_kernel_offers.store(offers);
  g_init_unique.store(r.header->unique);
  if (g_want.load() && !offers) {
    spdlog::info("FUSE passthrough off: this kernel does not offer it (Linux 6.9+ with CONFIG_FUSE_PASSTHROUGH)");
  }
}

bool PassthroughNegotiated() { return g_negotiated.load(); }

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
