#define FUSE_USE_VERSION 312
#include "fuse/fuse_adapter.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <functional>
#include <mutex>
#include <thread>

#include "chunk/read_pieces.h"
#include "fuse/access_log.h"
#include "fuse/fuse_internal.h"
#include "fuse/session_io.h"
#include "fuse/uring_queues.h"
#include "fuse/name_hints.h"
#include "fuse/raw_notify.h"
#include "fuse/remote_invalidation.h"
#include "meta/meta.h"
#include "metrics/metrics.h"
#include "vfs/vfs.h"

namespace tierfs {
namespace fuse_internal {

std::atomic<uint64_t> g_op_count[kOpCount];
std::atomic<uint64_t> g_op_ns[kOpCount];

Ctx MakeCtx(fuse_req_t req) {
  const fuse_ctx* c = fuse_req_ctx(req);
  Ctx ctx;
  ctx.uid = c->uid;
  ctx.gid = c->gid;
  ctx.pid = static_cast<uint32_t>(c->pid);
  ctx.umask = c->umask;
  ctx.load_groups = [req]() {
    std::vector<uint32_t> out;
    gid_t groups[64];
    int n = fuse_req_getgroups(req, 64, groups);
    for (int i = 0; i < n && i < 64; ++i) out.push_back(groups[i]);
    return out;
  };
  return ctx;
}

Ctx MakeCtx(fuse_req_t req, uint64_t kernel_ino) {
  Ctx ctx = MakeCtx(req);
  ctx.outside_trash = !IsTrashView(kernel_ino);
  return ctx;
}

thread_local int g_reply_err = 0;
thread_local Ino g_req_parent = 0;
thread_local const char* g_req_name = nullptr;

void NoteReplyName(Ino ino) {
  // Before the reply: the kernel may send the next request on the inode at once.
  if (g_req_name) NoteName(ino, g_req_parent, g_req_name);
}

void Reply(fuse_req_t req, const Status& st) {
  int err = st.ok() ? 0 : st.code();
  g_reply_err = err;
  if (err == EIO) spdlog::error("EIO: {}", st.message());
  fuse_reply_err(req, err);
}

void ToStat(uint64_t kernel_ino, const Attr& a, struct stat* st) {
  memset(st, 0, sizeof *st);
  st->st_ino = kernel_ino & ~kTrashView;  // both views of a trash entry are one file
  st->st_mode = a.mode;
  st->st_nlink = a.nlink;
  if (a.flags & kAttrInTrash) {
    if (IsTrashView(kernel_ino)) {
      // In .trash an entry is read-only and only its owner (and root) may read it: the
      // kernel checks permissions from these bits (default_permissions), so they show that.
      st->st_mode &= ~static_cast<mode_t>(07277);
    } else {
      // Its link in the trash is bookkeeping: to those who hold it, it has none (the trash
      // keeps only last links, so no other is left).
      st->st_nlink = 0;
    }
  }
  st->st_uid = a.uid;
  st->st_gid = a.gid;
  st->st_rdev = a.rdev;
  st->st_size = static_cast<off_t>(a.length);
  st->st_blksize = 4096;
  // Regular files count the 4 KiB blocks that hold data (the unit SEEK_DATA/SEEK_HOLE
  // report in), so sparse files look sparse (du, cp --sparse, tar); other types their length.
  uint64_t used = a.IsRegular() ? std::min(a.allocated, (a.length + 4095) / 4096 * 4096) : a.length;
  if (a.IsRegular()) used = (used + 4095) / 4096 * 4096;  // counts written before blocks were
  st->st_blocks = static_cast<blkcnt_t>((used + 511) / 512);
  st->st_atim.tv_sec = a.atime_ns / 1000000000;
  st->st_atim.tv_nsec = a.atime_ns % 1000000000;
  st->st_mtim.tv_sec = a.mtime_ns / 1000000000;
  st->st_mtim.tv_nsec = a.mtime_ns % 1000000000;
  st->st_ctim.tv_sec = a.ctime_ns / 1000000000;
  st->st_ctim.tv_nsec = a.ctime_ns % 1000000000;
}

// How long the kernel may keep a name without asking again. Never for an entry of the
// trash: the kernel's name cache is shared by all users, and Meta answers each user with
// only the entries that user owns (docs/design.md, "Local privacy").
double EntryTimeout(fuse_req_t req, const Attr& a) {
  if (a.flags & kAttrInTrash) return 0;
  return a.IsDir() ? O(req).dir_entry_timeout : O(req).entry_timeout;
}

void ReplyEntry(fuse_req_t req, const Entry& e, uint64_t kernel_ino) {
  fuse_entry_param p;
  memset(&p, 0, sizeof p);
  p.ino = kernel_ino ? kernel_ino : OutEntry(req, e.ino, e.attr);
  p.generation = 1;
  ToStat(p.ino, e.attr, &p.attr);
  p.attr_timeout = O(req).attr_timeout;
  p.entry_timeout = EntryTimeout(req, e.attr);
  NoteReplyName(e.ino);
  if (e.attr.IsRegular()) V(req)->NoteKernelLookup(e.ino);
  // Interrupted: the kernel did not take the lookup.
  if (fuse_reply_entry(req, &p) == -ENOENT && e.attr.IsRegular()) V(req)->Forget(e.ino, 1);
}

void ReplyAttr(fuse_req_t req, Ino ino, const Attr& a) {
  struct stat st;
  ToStat(ino, a, &st);
  fuse_reply_attr(req, &st, O(req).attr_timeout);
}

const char* const kOpNames[kOpCount] = {
    "lookup", "getattr", "setattr", "create", "open", "read", "write", "flush", "release", "fsync", "mknod",
    "mkdir", "unlink", "rmdir", "rename", "link", "symlink", "readlink", "opendir", "readdir", "releasedir",
    "getxattr", "setxattr", "listxattr", "removexattr", "access", "statfs", "lock", "fallocate",
    "copy_file_range", "forget", "lseek"};

}  // namespace fuse_internal

namespace {

using namespace fuse_internal;  // NOLINT

void DirectWriteLoop(Ctxt* c) {
  pthread_setname_np(pthread_self(), "fuse-dio-inval");
  DirectWriteReplies& d = c->direct;
  std::unique_lock<std::mutex> l(d.mu);
  for (;;) {
    d.cv.wait(l, [&] { return d.stopping || !d.queue.empty(); });
    if (d.queue.empty()) return;
    DirectWriteReplies::Item it = d.queue.front();
    d.queue.pop_front();
    l.unlock();
    // After the session ended the kernel is gone: the notification fails, the reply too.
    fuse_lowlevel_notify_inval_inode(c->se, it.ino, it.off, static_cast<off_t>(it.size));
    if (it.req) fuse_reply_write(it.req, it.size);
    l.lock();
  }
}

// Per-operation request counts and total latency (see fuse_internal.h).


void LogOpStats() {
  for (int i = 0; i < kOpCount; ++i) {
    uint64_t n = g_op_count[i].load();
    if (n == 0) continue;
    spdlog::info("fuse op {:<16} {:>10} requests, mean {:>8.1f} us", kOpNames[i], n,
                 static_cast<double>(g_op_ns[i].load()) / 1000.0 / static_cast<double>(n));
  }
}


// The kernel's readahead for the mount, in KiB. FUSE's INIT can only lower the backing
// device's default (128 KiB), so it is raised through sysfs: measured on a 1 GiB
// sequential read from a local bucket, 1.3 GB/s at 128 KiB and 1.7 GB/s at 1 MiB (8x fewer
// READs). It matches conn->max_readahead and the reader's out-of-order slack (2 MiB).
constexpr int kReadaheadKib = 1024;

// Raises the mount's readahead; the device is found in mountinfo (a stat of the mount
// point would wait for INIT, which this thread has yet to serve). Best effort: logs why not.
void RaiseReadahead(const std::string& mountpoint) {
  std::ifstream mi("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mi, line)) {
    std::istringstream in(line);
    std::string id, parent, dev, root, mp;
    if (!(in >> id >> parent >> dev >> root >> mp) || mp != mountpoint) continue;
    std::string path = "/sys/class/bdi/" + dev + "/read_ahead_kb";
    std::ofstream ra(path);
    ra << kReadaheadKib << "\n";
    ra.flush();
    if (!ra) spdlog::info("could not raise the readahead in {} (not root?)", path);
    return;
  }
  spdlog::info("could not raise the readahead: {} not in mountinfo", mountpoint);
}

void OpInit(void* userdata, fuse_conn_info* conn) {
  const FuseOptions& opts = static_cast<Ctxt*>(userdata)->opts;
  conn->max_write = 1 << 20;
  conn->max_readahead = kReadaheadKib << 10;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  auto want = [&](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_FLOCK_LOCKS);
  want(FUSE_CAP_POSIX_LOCKS);
  want(FUSE_CAP_ASYNC_READ);
  want(FUSE_CAP_PARALLEL_DIROPS);
  want(FUSE_CAP_READDIRPLUS);
  want(FUSE_CAP_READDIRPLUS_AUTO);
  want(FUSE_CAP_CACHE_SYMLINKS);
  // File handles (name_to_handle_at, open_by_handle_at, NFS export) of inodes the kernel
  // no longer caches resolve through lookups of "." and "..", which TierFS answers; inode
  // numbers are never reused, so generation 1 names an inode for good.
  want(FUSE_CAP_EXPORT_SUPPORT);
  // POSIX ACLs: the mode of a create reaches Meta with the umask unapplied (and the umask
  // beside it), because a parent's default ACL replaces the umask. With POSIX_ACL the
  // kernel also enforces and caches ACLs itself, but that capability turns
  // default_permissions on: without it (--no-default-permissions) ACLs still pass
  // through as xattrs and TierFS alone enforces them.
  want(FUSE_CAP_DONT_MASK);
  const auto& mo = opts.mount_options;
  if (std::find(mo.begin(), mo.end(), "default_permissions") != mo.end()) want(FUSE_CAP_POSIX_ACL);
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // The kernel's page cache of a file is dropped when the file changed under this client
  // (at open: keep_cache; on taking a lock: an explicit invalidation), never because an
  // attribute refresh shows a new mtime or size: those come from this client's own
  // commits too, and dropping pages a buffered write just marked up to date, before its
  // WRITE reached us, let a racing reader cache the old data for good.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  want(FUSE_CAP_EXPLICIT_INVAL_DATA);
}

// With --subdir, a file handle (open_by_handle_at) could name any inode of the volume: the
// kernel resolves it with a lookup of "." in it. Only inodes under the mount's root are
// answered: their parents lead to it (a file with several links has no parent recorded, so
// it is not answered either).
bool UnderRoot(fuse_req_t req, Ino ino) {
  const Ino root = O(req).root;
  for (int depth = 0; depth < 4096; ++depth) {
    if (ino == root) return true;
    if (ino == kRootIno) return false;
    auto a = V(req)->GetAttr(ino);
    if (!a.ok() || a->parent == 0 || a->parent == ino) return false;
    ino = a->parent;
  }
  return false;
}

// .accesslog's attributes: a root-only, read-only file of length 0 (read it as a stream).
struct stat AccessLogStat() {
  struct stat st;
  memset(&st, 0, sizeof st);
  st.st_ino = kAccessLogIno;
  st.st_mode = S_IFREG | 0400;
  st.st_nlink = 1;
  st.st_blksize = 4096;
  return st;
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(kOpLookup, req, parent, name);
  if (parent == 1 && strcmp(name, kAccessLogName) == 0) {
    fuse_entry_param p;
    memset(&p, 0, sizeof p);
    p.ino = kAccessLogIno;
    p.generation = 1;
    p.attr = AccessLogStat();
    p.attr_timeout = p.entry_timeout = 3600;
    fuse_reply_entry(req, &p);
    return;
  }
  if (O(req).root != kRootIno && strcmp(name, ".") == 0 && !UnderRoot(req, In(req, parent))) {
    return ReplyErr(req, ESTALE);
  }
  // Nothing above a --subdir root: its ".." (asked for by file-handle lookups) is itself.
  bool up_from_root = parent == 1 && strcmp(name, "..") == 0;
  auto r = V(req)->Lookup(MakeCtx(req, parent), In(req, parent), up_from_root ? "." : name);
  if (r.ok() && strcmp(name, ".") == 0) {
    // A file handle names the kernel's inode it was made from: the reply must be that one.
    // A handle of a trash entry's view whose entry was restored meanwhile is stale.
    if (IsTrashView(parent) && !(r->attr.flags & kAttrInTrash)) return ReplyErr(req, ESTALE);
    return ReplyEntry(req, *r, parent);
  }
  if (!r.ok()) {
    if (r.status().code() == ENOENT) {
      // Negative entry, cached by the kernel for the entry timeout.
      fuse_entry_param p;
      memset(&p, 0, sizeof p);
      p.entry_timeout = O(req).entry_timeout;
      fuse_reply_entry(req, &p);
      return;
    }
    return Reply(req, r.status());
  }
  ReplyEntry(req, *r);
}

void OpForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  OpTimer timer(kOpForget);
  V(req)->Forget(In(req, ino), nlookup);
  fuse_reply_none(req);
}

void OpForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) V(req)->Forget(In(req, forgets[i].ino), forgets[i].nlookup);
  fuse_reply_none(req);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  OpTimer timer(kOpGetattr, req, ino);
  if (ino == kAccessLogIno) {
    struct stat st = AccessLogStat();
    fuse_reply_attr(req, &st, 3600);
    return;
  }
  auto r = V(req)->GetAttr(In(req, ino));
  if (!r.ok()) return Reply(req, r.status());
  ReplyAttr(req, ino, *r);
}

void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  OpTimer timer(kOpSetattr, req, ino);
  if (ino == kAccessLogIno) return ReplyErr(req, EPERM);
  uint32_t mask = 0;
  Attr in;
  if (to_set & FUSE_SET_ATTR_MODE) { mask |= kSetMode; in.mode = attr->st_mode; }
  if (to_set & FUSE_SET_ATTR_UID) { mask |= kSetUid; in.uid = attr->st_uid; }
  if (to_set & FUSE_SET_ATTR_GID) { mask |= kSetGid; in.gid = attr->st_gid; }
  if (to_set & FUSE_SET_ATTR_SIZE) { mask |= kSetSize; in.length = static_cast<uint64_t>(attr->st_size); }
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) mask |= kSetAtimeNow;
  else if (to_set & FUSE_SET_ATTR_ATIME) {
    mask |= kSetAtime;
    in.atime_ns = attr->st_atim.tv_sec * 1000000000LL + attr->st_atim.tv_nsec;
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) mask |= kSetMtimeNow;
  else if (to_set & FUSE_SET_ATTR_MTIME) {
    mask |= kSetMtime;
    in.mtime_ns = attr->st_mtim.tv_sec * 1000000000LL + attr->st_mtim.tv_nsec;
  }
  if (to_set & FUSE_SET_ATTR_CTIME) {
    mask |= kSetCtime;
    in.ctime_ns = attr->st_ctim.tv_sec * 1000000000LL + attr->st_ctim.tv_nsec;
  }
  auto r = V(req)->SetAttr(MakeCtx(req, ino), In(req, ino), mask, in, fi ? fi->fh : 0);
  if (!r.ok()) return Reply(req, r.status());
  ReplyAttr(req, ino, *r);
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) {
  OpTimer timer(kOpReadlink, req, ino);
  auto r = V(req)->Readlink(In(req, ino));
  if (!r.ok()) return Reply(req, r.status());
  fuse_reply_readlink(req, r->c_str());
}

void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  OpTimer timer(kOpMknod, req, parent, name);
  auto r = V(req)->Mknod(MakeCtx(req, parent), In(req, parent), name, mode, rdev);
  if (!r.ok()) return Reply(req, r.status());
  ReplyEntry(req, *r);
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  OpTimer timer(kOpMkdir, req, parent, name);
  auto r = V(req)->Mkdir(MakeCtx(req, parent), In(req, parent), name, mode);
  if (!r.ok()) return Reply(req, r.status());
  ReplyEntry(req, *r);
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(kOpUnlink, req, parent, name);
  Reply(req, V(req)->Unlink(MakeCtx(req), In(req, parent), name));
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(kOpRmdir, req, parent, name);
  Reply(req, V(req)->Rmdir(MakeCtx(req), In(req, parent), name));
}

void OpSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  OpTimer timer(kOpSymlink, req, parent, name);
  auto r = V(req)->Symlink(MakeCtx(req, parent), In(req, parent), name, link);
  if (!r.ok()) return Reply(req, r.status());
  ReplyEntry(req, *r);
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
              unsigned int flags) {
  OpTimer timer(kOpRename, req, parent, name);
  uint32_t f = 0;
  if (flags & RENAME_NOREPLACE) f |= kRenameNoReplace;
  if (flags & RENAME_EXCHANGE) f |= kRenameExchange;
  if (flags & RENAME_WHITEOUT) f |= kRenameWhiteout;
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) return ReplyErr(req, EINVAL);
  Reply(req, V(req)->Rename(MakeCtx(req), In(req, parent), name, In(req, newparent), newname, f));
}

void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  OpTimer timer(kOpLink, req, newparent, newname);
  auto r = V(req)->Link(MakeCtx(req, newparent), In(req, ino), In(req, newparent), newname);
  if (!r.ok()) return Reply(req, r.status());
  ReplyEntry(req, *r);
}

thread_local std::vector<char> tls_read_buf;
thread_local std::vector<char> tls_gather_buf;  // a reply of more than kMaxReplyPieces pieces
// Pieces a read's reply may have as vectors of its own (IOV_MAX is 1024, the header is one).
constexpr size_t kMaxReplyPieces = 512;
thread_local ReadPieces tls_read_pieces;
thread_local std::vector<iovec> tls_read_iov;

// Blocks held in memory go to the kernel straight from the cache (fuse_reply_iov writes
// the pieces with one writev); only bytes read from the disk cache or a ranged GET, and
// zeros, pass through the per-thread scratch buffer.
void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  OpTimer timer(kOpRead, req, ino);
  timer.SetArgs(static_cast<uint64_t>(off), size);
  if (ino == kAccessLogIno) return ReadAccessLog(req, fi->fh, size);
  if (tls_read_buf.size() < size) tls_read_buf.resize(size);
  tls_read_pieces.Clear();
  auto r = V(req)->Read(fi->fh, static_cast<uint64_t>(off), size, tls_read_buf.data(), &tls_read_pieces);
  if (!r.ok()) {
    tls_read_pieces.Clear();
    return Reply(req, r.status());
  }
  tls_read_iov.clear();
  const auto& pieces = tls_read_pieces.pieces();
  if (pieces.size() > kMaxReplyPieces) {
    // writev takes at most IOV_MAX (1024) vectors, the reply's header among them: a read of
    // a chunk made of thousands of tiny slices (lines appended and fsync'd one at a time,
    // compaction behind) had more pieces, its reply failed with EINVAL before reaching the
    // kernel, and the kernel kept the request, and the reader, waiting for good (found by
    // the etcd failover soak). Such a read is gathered into one buffer.
    size_t total = 0;
    for (const ReadPiece& p : pieces) total += p.len;
    if (tls_gather_buf.size() < total) tls_gather_buf.resize(total);
    size_t at = 0;
    for (const ReadPiece& p : pieces) {
      memcpy(tls_gather_buf.data() + at, p.data, p.len);
      at += p.len;
    }
    tls_read_iov.push_back({tls_gather_buf.data(), total});
  } else {
    for (const ReadPiece& p : pieces) tls_read_iov.push_back({const_cast<char*>(p.data), p.len});
  }
  int rc = tls_read_iov.empty() ? fuse_reply_buf(req, nullptr, 0)
                                : fuse_reply_iov(req, tls_read_iov.data(), static_cast<int>(tls_read_iov.size()));
  if (rc < 0 && rc != -ENOENT) spdlog::error("the reply to a read of inode {} failed: {}", ino, strerror(-rc));
  tls_read_pieces.Clear();  // releases the blocks held for the reply
}

void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  OpTimer timer(kOpWrite, req, ino);
  timer.SetArgs(static_cast<uint64_t>(off), size);
  Status st = V(req)->Write(fi->fh, static_cast<uint64_t>(off), buf, size);
  if (!st.ok()) return Reply(req, st);
  // A page-cache writeback (writepage) must not wait for its own pages.
  if ((fi->flags & O_DIRECT) && !fi->writepage && size > 0) {
    DirectWriteReplies& d = static_cast<Ctxt*>(fuse_req_userdata(req))->direct;
    {
      std::lock_guard<std::mutex> l(d.mu);
      d.queue.push_back({req, ino, off, size});
    }
    d.cv.notify_one();
    return;
  }
  fuse_reply_write(req, size);
}

void OpFlush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(kOpFlush, req, ino);
  if (ino == kAccessLogIno) return ReplyErr(req, 0);
  Reply(req, V(req)->Flush(fi->fh, fi->lock_owner));
}

void OpRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(kOpRelease, req, ino);
  if (ino == kAccessLogIno) {
    AccessLog::Close(fi->fh);
    return ReplyErr(req, 0);
  }
  static_cast<Ctxt*>(fuse_req_userdata(req))->opens->End(In(req, ino), fi->fh);
  Reply(req, V(req)->Release(fi->fh));
}

void OpFsync(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info* fi) {
  OpTimer timer(kOpFsync, req, ino);
  Reply(req, V(req)->Fsync(fi->fh));
}

void OpStatfs(fuse_req_t req, fuse_ino_t ino) {
  OpTimer timer(kOpStatfs, req, ino);
  // The path's nearest directory quota, else the volume (on a local disk: that disk).
  auto r = V(req)->GetStatFs(In(req, ino));
  if (!r.ok()) return Reply(req, r.status());
  constexpr uint64_t kBsize = 4096;
  const uint64_t kCapacity = r->capacity_bytes;
  const uint64_t kInodes = r->max_inodes ? r->max_inodes : 1ull << 40;
  struct statvfs s;
  memset(&s, 0, sizeof s);
  s.f_bsize = kBsize;
  s.f_frsize = kBsize;
  uint64_t used = std::min(r->used_bytes, kCapacity);
  s.f_blocks = kCapacity / kBsize;
  s.f_bfree = s.f_bavail = (kCapacity - used) / kBsize;
  // df shows used = blocks - bfree (the volume's usage) and avail = bavail (also bounded
  // by the store's room).
  if (r->available_bytes) s.f_bavail = std::min<uint64_t>(s.f_bavail, *r->available_bytes / kBsize);
  s.f_files = kInodes;
  s.f_ffree = s.f_favail = kInodes - std::min(r->inodes, kInodes);
  s.f_namemax = 255;
  fuse_reply_statfs(req, &s);
}

// Tells the kernel to drop its entry parent/name, from a thread of its own that shares
// nothing with the session: it writes the notification on its own duplicate of the FUSE
// device, so it may outlive the session (a notification the kernel holds back until a
// directory lock is free must neither delay the session's end nor use it after
// fuse_session_destroy; the process's exit closes the duplicate and ends the wait).
void NotifyInvalEntryDetached(fuse_session* se, uint64_t parent, const std::string& name) {
  int fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return;
  std::thread([fd, parent, name] {
    if (int rc = NotifyInvalEntry(fd, parent, name); rc < 0 && rc != -ENOENT) {
      spdlog::debug("dropping the kernel's entry {}/{}: {}", parent, name, strerror(-rc));
    }
    close(fd);
  }).detach();
}

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  OpTimer timer(kOpSetxattr, req, ino);
  Status st = V(req)->SetXattr(MakeCtx(req, ino), In(req, ino), name, std::string(value, size), flags);
  if (st.ok() && strcmp(name, Vfs::kCloneXattr) == 0) {
    // The kernel may hold a negative entry for the clone's name (the caller looked first).
    // Dropped from another thread: this request holds the source's lock, and the source
    // may be an ancestor of the destination directory.
    uint64_t parent;
    std::string n;
    fuse_session* se = static_cast<Ctxt*>(fuse_req_userdata(req))->se;
    if (se && Vfs::CloneTarget(std::string(value, size), &parent, &n)) NotifyInvalEntryDetached(se, parent, n);
  }
  Reply(req, st);
}

void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  OpTimer timer(kOpGetxattr, req, ino);
  if (ino == kAccessLogIno) return ReplyErr(req, ENODATA);
  auto r = V(req)->GetXattr(MakeCtx(req, ino), In(req, ino), name);
  if (!r.ok()) return Reply(req, r.status());
  if ((size == 0 || r->size() > size) && Vfs::IsCacheXattr(name)) V(req)->KeepCacheAnswer(In(req, ino), name, *r);
  if (size == 0) return (void)fuse_reply_xattr(req, r->size());
  if (r->size() > size) return ReplyErr(req, ERANGE);
  fuse_reply_buf(req, r->data(), r->size());
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  OpTimer timer(kOpListxattr, req, ino);
  auto r = V(req)->ListXattr(MakeCtx(req, ino), In(req, ino));
  if (!r.ok()) return Reply(req, r.status());
  std::string buf;
  for (const auto& n : *r) {
    buf.append(n);
    buf.push_back('\0');
  }
  if (size == 0) return (void)fuse_reply_xattr(req, buf.size());
  if (buf.size() > size) return ReplyErr(req, ERANGE);
  fuse_reply_buf(req, buf.data(), buf.size());
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  OpTimer timer(kOpRemovexattr, req, ino);
  Reply(req, V(req)->RemoveXattr(MakeCtx(req, ino), In(req, ino), name));
}

void OpAccess(fuse_req_t req, fuse_ino_t ino, int mask) {
  OpTimer timer(kOpAccess, req, ino);
  Reply(req, V(req)->Access(MakeCtx(req, ino), In(req, ino), mask));
}


void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info* fi) {
  OpTimer timer(kOpFallocate, req, ino);
  Reply(req, V(req)->Fallocate(MakeCtx(req), fi->fh, mode, static_cast<uint64_t>(offset),
                               static_cast<uint64_t>(length)));
}

void OpLseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi) {
  OpTimer timer(kOpLseek, req, ino);
  auto r = V(req)->Lseek(fi->fh, static_cast<uint64_t>(off), whence);
  if (!r.ok()) return Reply(req, r.status());
  fuse_reply_lseek(req, static_cast<off_t>(*r));
}

void OpCopyFileRange(fuse_req_t req, fuse_ino_t ino, off_t off_in, fuse_file_info* fi_in, fuse_ino_t, off_t off_out,
                     fuse_file_info* fi_out, size_t len, int) {
  OpTimer timer(kOpCopyFileRange, req, ino);
  auto r = V(req)->CopyFileRange(MakeCtx(req), fi_in->fh, static_cast<uint64_t>(off_in), fi_out->fh,
                                 static_cast<uint64_t>(off_out), len);
  if (!r.ok()) return Reply(req, r.status());
  fuse_reply_write(req, *r);
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.forget = OpForget;
  ops.forget_multi = OpForgetMulti;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.readlink = OpReadlink;
  ops.mknod = OpMknod;
  ops.mkdir = OpMkdir;
  ops.unlink = OpUnlink;
  ops.rmdir = OpRmdir;
  ops.symlink = OpSymlink;
  ops.rename = OpRename;
  ops.link = OpLink;
  ops.open = OpOpen;
  ops.create = OpCreate;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.readdirplus = OpReaddirplus;
  ops.releasedir = OpReleasedir;
  ops.fsyncdir = OpFsyncdir;
  ops.statfs = OpStatfs;
  ops.setxattr = OpSetxattr;
  ops.getxattr = OpGetxattr;
  ops.listxattr = OpListxattr;
  ops.removexattr = OpRemovexattr;
  ops.access = OpAccess;
  ops.flock = OpFlock;
  ops.getlk = OpGetlk;
  ops.setlk = OpSetlk;
  ops.fallocate = OpFallocate;
  ops.copy_file_range = OpCopyFileRange;
  ops.lseek = OpLseek;
  return ops;
}

}  // namespace

Status RunFuse(Vfs* vfs, const FuseOptions& opts, const std::function<void(const Status&)>& on_ready) {
  Ctxt ctxt{vfs, opts, nullptr, {}, {}, nullptr};
  std::vector<std::string> argv_s = {"tierfs"};
  std::string o = "fsname=" + opts.fsname + ",subtype=tierfs";
  for (const auto& m : opts.mount_options) o += "," + m;
  argv_s.push_back("-o");
  argv_s.push_back(o);
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_lowlevel_ops ops = MakeOps();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &ctxt);
  ctxt.se = se;
  if (!se) {
    Status st = Status::Err(EINVAL, "could not create the FUSE session (bad -o option?): " + o);
    on_ready(st);
    return st;
  }
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    Status st = Status::Err(EIO, "could not install signal handlers");
    on_ready(st);
    return st;
  }
  if (fuse_session_mount(se, opts.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    Status st = Status::Err(EIO, "mounting on " + opts.mountpoint +
                                     " failed (is /dev/fuse available, and are you root or is fusermount3 installed?)");
    on_ready(st);
    return st;
  }
  RaiseReadahead(opts.mountpoint);
  ctxt.opens = std::make_unique<PassthroughOpens>(fuse_session_fd(se));
  auto raw = [&ctxt](const RawRequest& r) { return HandleRawRequest(&ctxt, r); };
  std::unique_ptr<UringQueues> uring;
  if (opts.io_uring) uring = std::make_unique<UringQueues>(se, raw, opts.io_uring_threads, opts.io_uring_depth);
  const bool passthrough = opts.passthrough && vfs->flat_files();
  ctxt.opens->Enable(InstallSessionIo(se, {passthrough, uring.get()}) && passthrough);
  on_ready(Status::OK());
  ctxt.direct.thread = std::thread(DirectWriteLoop, &ctxt);
  // The pages of files the vfs fences (Vfs::OnSessionLost) are dropped, so that reads reach
  // it and fail instead of being served from the page cache; on the same thread, for the
  // same reason.
  vfs->SetPageInvalidator([&ctxt](Ino ino) {
    std::lock_guard<std::mutex> l(ctxt.direct.mu);
    if (ctxt.direct.stopping) return;
    ctxt.direct.queue.push_back({nullptr, InoOut(ctxt.opts.root, ino), 0, 0});
    ctxt.direct.cv.notify_all();
  });
  std::unique_ptr<RemoteInvalidation> remote;
  if (opts.meta_watch) {
    remote = RemoteInvalidation::Start(vfs->meta()->engine(), se, opts.root,
                                       [meta = vfs->meta()](uint64_t ino) { return meta->IsOpen(ino); });
  }
  int rc = ServeSession(se, opts.max_threads, raw);
  if (uring) uring->Stop();
  remote.reset();
  {
    // Lock waiters use the session and the Vfs: they end (EINTR) before either goes.
    std::unique_lock<std::mutex> l(ctxt.waiters.mu);
    ctxt.waiters.stopping = true;
    ctxt.waiters.cv.wait(l, [&] { return ctxt.waiters.running == 0; });
  }
  vfs->SetPageInvalidator(nullptr);
  {
    std::lock_guard<std::mutex> l(ctxt.direct.mu);
    ctxt.direct.stopping = true;
  }
  ctxt.direct.cv.notify_all();
  ctxt.direct.thread.join();
  LogOpStats();
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  if (rc != 0 && rc != SIGINT && rc != SIGTERM && rc != SIGHUP) {
    return Status::Err(EIO, "FUSE loop ended with error " + std::to_string(rc));
  }
  return Status::OK();
}

}  // namespace tierfs
