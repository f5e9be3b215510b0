// Serves a mounted libfuse session with a fixed pool of threads, in place of
// fuse_session_loop_mt, so that requests libfuse 3.14 does not know can still be answered:
// each request is offered to a raw handler first (FUSE_TMPFILE, from kernels newer than
// the library), and everything it declines goes to libfuse's own dispatch.
//
// The loop ends when the kernel unmounts the file system (reading the device fails with
// ENODEV) or the session is told to exit (libfuse's signal handlers call
// fuse_session_exit); workers blocked reading the device are then woken with a signal.
// It logs which of these ended it (the signal, the read error, or the kernel).
//
// Threads: ServeSession blocks its caller; the handler runs on the workers, several at once.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

struct fuse_session;
struct fuse_in_header;

namespace tierfs {

struct RawRequest {
  const fuse_in_header* header;
  const char* arg;  // the request's arguments after the header
  size_t arg_size;
};

// Returns true when it answered the request itself (with RawReply).
using RawHandler = std::function<bool(const RawRequest&)>;

// Returns 0, or a negative errno when reading the device failed.
int ServeSession(fuse_session* se, int threads, const RawHandler& raw);

// Answers a request taken by a RawHandler: error is 0 or a negative errno (then the payload
// is ignored). Returns 0 or a negative errno (-ENOENT: the request was interrupted).
int RawReply(fuse_session* se, uint64_t unique, int error, const std::vector<iovec>& payload);

}  // namespace tierfs
