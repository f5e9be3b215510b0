// The session's I/O with the kernel, replacing libfuse's (fuse_session_custom_io) so that
// TierFS can use protocol features newer than libfuse 3.14:
//
//   INIT     the kernel's INIT request is noted (NoteInitRequest: what it offers); libfuse's
//            INIT reply gets the flags libfuse does not know, when wanted and offered:
//              FUSE_PASSTHROUGH   bit 37 (flags2 bit 5) and max_stack_depth 1
//                                 (fuse/kernel_passthrough.h)
//              FUSE_OVER_IO_URING bit 41 (flags2 bit 9) (fuse/uring_queues.h); the kernel
//                                 offers it when /sys/module/fuse/parameters/enable_uring
//                                 is Y (Linux 6.14+). Once the reply is written, the
//                                 queues start; the kernel moves requests to them only when
//                                 every queue has registered.
//   REPLIES  every reply (libfuse's and RawReply's) goes through SendToKernel: a reply to a
//            request an io_uring queue delivered is committed into that queue's entry;
//            everything else (notifications, requests read from /dev/fuse: FORGET and
//            INTERRUPT always come that way) is written to the device.
//
// Threads: any thread may send; Install runs before the session is served.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>

struct fuse_session;

namespace tierfs {

struct RawRequest;

namespace fuse_internal {

class UringQueues;

struct SessionIoWants {
  bool passthrough = false;
  UringQueues* uring = nullptr;  // null: io_uring not wanted
};

// Installs the session's I/O. Call after fuse_session_mount, before serving. Returns false
// (and logs) when libfuse refused it: neither feature is negotiated then.
bool InstallSessionIo(fuse_session* se, const SessionIoWants& wants);
// The raw handler's look at every request before libfuse sees it: the INIT request is
// noted (its id, and what the kernel offers). Never answers it.
void NoteInitRequest(const RawRequest& r);
// Whether the INIT reply asked for passthrough (the kernel offered it and it was wanted).
bool PassthroughNegotiated();
// Whether the INIT reply asked for io_uring queues (offered and wanted).
bool UringNegotiated();

// Sends a reply or notification (iov[0] starts with a fuse_out_header): returns the bytes
// taken, or -1 with errno set (ENOENT: the kernel no longer waits for that request).
ssize_t SendToKernel(int dev_fd, const iovec* iov, int count);

}  // namespace fuse_internal
}  // namespace tierfs
