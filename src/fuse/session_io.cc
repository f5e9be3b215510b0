#define FUSE_USE_VERSION 312
#include "fuse/session_io.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "fuse/kernel_passthrough.h"
#include "fuse/session_loop.h"
#include "fuse/uring_queues.h"

namespace tierfs::fuse_internal {
namespace {

constexpr uint32_t kFlags2OverIoUring = 1u << (41 - 32);

std::atomic<bool> g_want_passthrough{false};
std::atomic<UringQueues*> g_uring{nullptr};  // wanted, and later the one replies go to
std::atomic<uint64_t> g_init_unique{0};
std::atomic<uint32_t> g_offered_flags2{0};
std::atomic<bool> g_passthrough{false};
std::atomic<bool> g_uring_negotiated{false};

ssize_t Read(int fd, void* buf, size_t len, void*) { return read(fd, buf, len); }

// libfuse's INIT reply, with the flags it does not know added; starts the io_uring queues
// once the kernel has taken it.
ssize_t WriteInitReply(int fd, const iovec* iov) {
  fuse_init_out out;
  memcpy(&out, iov[1].iov_base, sizeof out);
  const uint32_t offered = g_offered_flags2.load();
  const bool passthrough = g_want_passthrough.load() && (offered & kFlags2Passthrough);
  UringQueues* uring = g_uring.load();
  const bool io_uring = uring != nullptr && (offered & kFlags2OverIoUring);
  if (passthrough) {
    out.flags |= FUSE_INIT_EXT;
    out.flags2 |= kFlags2Passthrough;
    out.unused[0] = 1;  // max_stack_depth: backing files on non-stacked file systems
  }
  if (io_uring) {
    out.flags |= FUSE_INIT_EXT;
    out.flags2 |= kFlags2OverIoUring;
  }
  g_passthrough.store(passthrough);
  g_uring_negotiated.store(io_uring);
  iovec patched[2] = {iov[0], {&out, sizeof out}};
  ssize_t n = writev(fd, patched, 2);
  if (n < 0) return n;
  if (io_uring) {
    // The kernel sizes each entry's payload buffer to the largest request or reply it may
    // send: max_write, max_pages pages, and at least 8 KiB (FUSE_MIN_READ_BUFFER).
    size_t pages = (out.flags & FUSE_MAX_PAGES) ? out.max_pages : 32;
    size_t payload = std::max<size_t>({8192, out.max_write, pages * static_cast<size_t>(getpagesize())});
    uring->Start(payload);
  } else if (uring) {
    spdlog::info("FUSE over io_uring off: this kernel does not offer it (Linux 6.14+ with "
                 "/sys/module/fuse/parameters/enable_uring set to Y)");
  }
  return n;
}

ssize_t Writev(int fd, iovec* iov, int count, void*) { return SendToKernel(fd, iov, count); }

}  // namespace

ssize_t SendToKernel(int fd, const iovec* iov, int count) {
  if (count >= 1 && iov[0].iov_len >= sizeof(fuse_out_header)) {
    const auto* h = static_cast<const fuse_out_header*>(iov[0].iov_base);
    const uint64_t init = g_init_unique.load();
    if (init != 0 && h->unique == init && h->error == 0 && count >= 2 && iov[1].iov_len >= sizeof(fuse_init_out)) {
      g_init_unique.store(0);
      return WriteInitReply(fd, iov);
    }
    if (UringQueues* uring = g_uring.load(); uring != nullptr && h->unique != 0) {
      ssize_t n = uring->TakeReply(iov, count);
      if (n != UringQueues::kNotMine) return n;
    }
  }
  return writev(fd, iov, count);
}

bool InstallSessionIo(fuse_session* se, const SessionIoWants& wants) {
  g_want_passthrough.store(wants.passthrough);
  g_uring.store(wants.uring);
  g_passthrough.store(false);
  g_uring_negotiated.store(false);
  if (!wants.passthrough && !wants.uring) return true;
  fuse_custom_io io;
  memset(&io, 0, sizeof io);
  io.read = Read;
  io.writev = Writev;
  int rc = fuse_session_custom_io(se, &io, fuse_session_fd(se));
  if (rc != 0) {
    spdlog::warn("FUSE passthrough and io_uring off: the session's I/O could not be set ({})", strerror(-rc));
    g_want_passthrough.store(false);
    g_uring.store(nullptr);
    return false;
  }
  return true;
}

void NoteInitRequest(const RawRequest& r) {
  if (r.header->opcode != FUSE_INIT || r.arg_size < sizeof(fuse_init_in)) return;
  fuse_init_in in;
  memcpy(&in, r.arg, sizeof in);
  uint32_t offered = (in.flags & FUSE_INIT_EXT) ? in.flags2 : 0;
  if (const char* f = getenv("TIERFS_FAULT_NO_KERNEL_PASSTHROUGH"); f && *f == '1' && (offered & kFlags2Passthrough)) {
    spdlog::warn("TIERFS_FAULT_NO_KERNEL_PASSTHROUGH: the kernel's passthrough offer is ignored (tests only)");
    offered &= ~kFlags2Passthrough;
  }
  if (const char* f = getenv("TIERFS_FAULT_NO_KERNEL_URING"); f && *f == '1' && (offered & kFlags2OverIoUring)) {
    spdlog::warn("TIERFS_FAULT_NO_KERNEL_URING: the kernel's io_uring offer is ignored (tests only)");
    offered &= ~kFlags2OverIoUring;
  }
  g_offered_flags2.store(offered);
  g_init_unique.store(r.header->unique);
  if (g_want_passthrough.load() && !(offered & kFlags2Passthrough)) {
    spdlog::info("FUSE passthrough off: this kernel does not offer it (Linux 6.9+ with CONFIG_FUSE_PASSTHROUGH)");
  }
}

bool PassthroughNegotiated() { return g_passthrough.load(); }
bool UringNegotiated() { return g_uring_negotiated.load(); }

}  // namespace tierfs::fuse_internal
