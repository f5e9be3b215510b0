// Internal to the FUSE adapter files (fuse_*.cc): the session context every request
// handler reaches through fuse_req_userdata, and the helpers they share.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <functional>
#include <memory>
#include <thread>

#include "common/status.h"
#include "fuse/fuse_adapter.h"
#include "fuse/passthrough_opens.h"
#include "fuse/session_loop.h"
#include "meta/meta.h"
#include "vfs/vfs.h"

namespace tierfs::fuse_internal {

// Blocking lock requests (flock, F_SETLKW) that could not be granted at once, and reads of
// .accesslog with nothing to read yet, wait on a thread of their own, not on a FUSE worker:
// with every worker waiting, the request that releases the lock (or makes the line) could
// never be served.
struct LockWaiters {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;        // guarded by mu
  std::atomic<bool> stopping{false};  // set once the session has ended; waiters then give up

  // Runs wait (which replies to its request) on a detached thread the session's end waits for.
  void Spawn(std::function<void()> wait) {
    {
      std::lock_guard<std::mutex> l(mu);
      ++running;
    }
    std::thread([this, wait = std::move(wait)] {
      wait();
      std::lock_guard<std::mutex> l(mu);
      --running;
      cv.notify_all();
    }).detach();
  }
};

// Replies to O_DIRECT writes after dropping the kernel's cached pages of the range.
//
// The kernel drops them itself after a synchronous direct write, but after an
// asynchronous one (AIO, io_uring) only before sending it: a buffered reader or an mmap
// fault that reads the range while the write is on its way caches the old data again, and
// every later buffered read returns it (the kernel fix came after the kernels this runs
// on). Invalidating here, once the write is applied and before the write completes, closes
// that window. It runs on a thread of its own, not on a FUSE worker: invalidation waits
// for pages that readers hold locked until their READ is answered, and those READs need
// free workers.
struct DirectWriteReplies {
  struct Item {
    fuse_req_t req;  // null: only the invalidation (pages of a fenced file)
    fuse_ino_t ino;
    off_t off;
    size_t size;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;  // guarded by mu
  bool stopping = false;   // guarded by mu
  std::thread thread;
};

struct Ctxt {
  Vfs* vfs;
  FuseOptions opts;
  fuse_session* se = nullptr;
  LockWaiters waiters;
  DirectWriteReplies direct;
  // The kernel io mode of every open file (fuse/passthrough_opens.h); set once the session
  // is mounted, before it is served.
  std::unique_ptr<PassthroughOpens> opens;
};

// The caller of a request libfuse does not parse (fuse_raw.cc): ids from the header,
// supplementary groups from /proc when asked.
Ctx RawCtx(const fuse_in_header& h);
// Counts a caching-mode open of ino, then calls answer(true), which sends the reply. When
// the file is open through passthrough here, the wait for those opens to end runs on a
// waiter thread, which calls answer(true), or answer(false) when they did not end in time
// (answer then releases the handle and replies ETXTBSY).
void BeginCachedOpen(Ctxt* c, Ino ino, std::function<void(bool)> answer);
// libfuse's open and create handlers (fuse_open.cc).
void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
// Answers a read-only FUSE_OPEN itself, in passthrough mode when the file's flat copy is
// ready (fuse_open.cc); false leaves the request to libfuse.
bool HandlePassthroughOpen(Ctxt* c, const RawRequest& r);

// Per-operation request counts and total latency, logged when the file system unmounts,
// and kept as latency histograms in the metrics (metrics/metrics.h).
enum Op { kOpLookup, kOpGetattr, kOpSetattr, kOpCreate, kOpOpen, kOpRead, kOpWrite, kOpFlush, kOpRelease,
          kOpFsync, kOpMknod, kOpMkdir, kOpUnlink, kOpRmdir, kOpRename, kOpLink, kOpSymlink, kOpReadlink,
          kOpOpendir, kOpReaddir, kOpReleasedir, kOpGetxattr, kOpSetxattr, kOpListxattr, kOpRemovexattr,
          kOpAccess, kOpStatfs, kOpLock, kOpFallocate, kOpCopyFileRange, kOpForget, kOpLseek, kOpCount };
extern std::atomic<uint64_t> g_op_count[kOpCount];
extern std::atomic<uint64_t> g_op_ns[kOpCount];
extern const char* const kOpNames[kOpCount];

// Times one request. With the inode (and name) it is about, an operation slower than
// FuseOptions::slow_op_ns is logged with the path and the time it spent in metadata
// transactions and object store requests, and while .accesslog is read every request is
// written to it (op_log.cc, access_log.h).
class OpTimer {
 public:
  explicit OpTimer(Op op);
  OpTimer(Op op, fuse_req_t req, uint64_t kernel_ino, const char* name = nullptr);
  // A request taken raw (fuse_raw.cc): the caller and inode from its header.
  OpTimer(Op op, struct Ctxt* c, const fuse_in_header& h);
  ~OpTimer();
  // Offset and size (read, write, fallocate...) for the access log.
  void SetArgs(uint64_t a, uint64_t b) {
    a_ = a;
    b_ = b;
    has_args_ = true;
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  void Setup(Vfs* vfs, const FuseOptions& opts, uint64_t kernel_ino, const char* name, uint32_t uid, uint32_t gid,
             uint32_t pid);
  Op op_;
  std::chrono::steady_clock::time_point start_;
  int64_t meta_ns0_ = 0, store_ns0_ = 0;  // this thread's totals when the request began
  Vfs* vfs_ = nullptr;                    // null: no slow-op log
  int64_t slow_ns_ = 0;
  Ino ino_ = 0;
  const char* name_ = nullptr;  // valid for the request's life (the handler's argument)
  bool log_ = false;            // an access log reader is attached
  uint32_t uid_ = 0, gid_ = 0, pid_ = 0;
  uint64_t a_ = 0, b_ = 0;
  bool has_args_ = false;
};
// The errno of the last reply this thread sent through Reply/ReplyErr (0: success), for
// the access log.
extern thread_local int g_reply_err;
// The directory and name of this thread's request (set by its OpTimer; name null when the
// request names none): an entry reply (ReplyEntry, create) remembers the name it gives the
// kernel (name_hints.h).
extern thread_local Ino g_req_parent;
extern thread_local const char* g_req_name;
void NoteReplyName(Ino ino);

inline Vfs* V(fuse_req_t req) { return static_cast<Ctxt*>(fuse_req_userdata(req))->vfs; }
inline const FuseOptions& O(fuse_req_t req) { return static_cast<Ctxt*>(fuse_req_userdata(req))->opts; }
// A trash entry reached through .trash (a lookup or listing of an hour directory) is handed
// to the kernel under its inode number with this bit set: a second kernel inode for it, the
// read-only entry of the trash. Without the bit the kernel's inode is the file as those who
// had it before its removal know it (open descriptors, names resolved before, file handles):
// an unlinked file, usable as its mode allows (Ctx::outside_trash), with no link left.
constexpr uint64_t kTrashView = 1ull << 63;
inline bool IsTrashView(uint64_t kernel_ino) { return (kernel_ino & kTrashView) != 0; }
// Inode numbers between the kernel and the volume: they differ for the mount's root, which
// is FUSE_ROOT_ID (1) to the kernel and FuseOptions::root (--subdir) to the volume, and for
// trash entries seen through .trash (kTrashView).
inline Ino InoIn(Ino root, uint64_t kernel_ino) {
  kernel_ino &= ~kTrashView;
  return kernel_ino == 1 ? root : kernel_ino;
}
inline uint64_t InoOut(Ino root, Ino ino) { return ino == root ? 1 : ino; }
inline Ino In(fuse_req_t req, uint64_t kernel_ino) { return InoIn(O(req).root, kernel_ino); }
inline uint64_t Out(fuse_req_t req, Ino ino) { return InoOut(O(req).root, ino); }
// The kernel's inode for an entry a lookup or listing found: trash entries are found
// through .trash only, and get the trash's view of them.
inline uint64_t OutEntry(fuse_req_t req, Ino ino, const Attr& a) {
  return Out(req, ino) | ((a.flags & kAttrInTrash) ? kTrashView : 0);
}
// The caller of a request; supplementary groups are read only when a check needs them.
// With the kernel's inode the request is about, it also says whether the caller reached a
// trash entry outside the trash (Ctx::outside_trash).
Ctx MakeCtx(fuse_req_t req);
Ctx MakeCtx(fuse_req_t req, uint64_t kernel_ino);
inline void ReplyErr(fuse_req_t req, int err) {
  g_reply_err = err;
  fuse_reply_err(req, err);
}
// errno of st (0 when OK) as the reply; EIO is logged with its message.
void Reply(fuse_req_t req, const Status& st);
// The attributes the kernel is given for its inode kernel_ino (which decides how a trash
// entry shows: kTrashView).
void ToStat(uint64_t kernel_ino, const Attr& a, struct stat* st);
// An entry reply, for the kernel inode kernel_ino (0: the one OutEntry gives the entry).
void ReplyEntry(fuse_req_t req, const Entry& e, uint64_t kernel_ino = 0);
void ReplyAttr(fuse_req_t req, Ino ino, const Attr& a);
// How long the kernel may keep a name (never one of the trash: its name cache is shared by
// all users, and a trash hour shows each user only their own entries).
double EntryTimeout(fuse_req_t req, const Attr& a);

// Directory requests (fuse_dirs.cc).
void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void OpReleasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void OpFsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);

// Requests libfuse does not know or cannot answer (fuse_raw.cc): true when it answered this one.
bool HandleRawRequest(Ctxt* c, const RawRequest& r);

// A read of .accesslog (fuse_access_log.cc): replies now, or later from a waiter thread.
void ReadAccessLog(fuse_req_t req, uint64_t fh, size_t size);

// Advisory locks (fuse_locks.cc).
void OpFlock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op);
void OpGetlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock);
void OpSetlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep);

}  // namespace tierfs::fuse_internal
