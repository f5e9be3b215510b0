// The FUSE end of .accesslog (access_log.h): its reads.
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "fuse/access_log.h"
#include "fuse/fuse_internal.h"

namespace tierfs::fuse_internal {

// A stream: the lines queued for this reader, or, when there are none yet, a wait on a thread
// of its own (as a blocking lock waits, fuse_locks.cc) until some come or the reader gives
// up. Waiting on the FUSE worker starved the mount, and as many readers as workers hung it:
// the requests whose lines they waited for could not be served.
void ReadAccessLog(fuse_req_t req, uint64_t fh, size_t size) {
  std::string lines = AccessLog::Read(fh, size, std::chrono::milliseconds(0));
  if (!lines.empty()) {
    fuse_reply_buf(req, lines.data(), lines.size());
    return;
  }
  LockWaiters* w = &static_cast<Ctxt*>(fuse_req_userdata(req))->waiters;
  w->Spawn([req, fh, size, w] {
    std::string got;
    while (got.empty() && !fuse_req_interrupted(req) && !w->stopping) {
      got = AccessLog::Read(fh, size, std::chrono::seconds(1));
    }
    if (got.empty()) {
      ReplyErr(req, EINTR);
    } else {
      fuse_reply_buf(req, got.data(), got.size());
    }
  });
}

}  // namespace tierfs::fuse_internal
