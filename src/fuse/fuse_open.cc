// Opens of files: OpOpen and OpCreate (through libfuse), and read-only opens when
// passthrough was negotiated (fuse/kernel_passthrough.h), answered here, raw, in passthrough mode onto the file's verified flat copy when it has one
// (Vfs::PassthroughCopy), in caching mode otherwise. Either way the open is the Vfs's
// usual one (permissions, close-to-open refresh, access time); only the reads differ.
// Opens for writing, O_TRUNC and O_DIRECT opens, the trash view and .accesslog go to
// libfuse (OpOpen). Every open is counted in the inode's io modes (fuse/passthrough_opens.h)
// before its reply.
#define FUSE_USE_VERSION 312
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include <cstring>

#include "fuse/access_log.h"
#include "fuse/fuse_internal.h"
#include "fuse/kernel_passthrough.h"
#include "fuse/raw_notify.h"
#include "fuse/session_io.h"
#include "fuse/session_loop.h"

namespace tierfs::fuse_internal {

void BeginCachedOpen(Ctxt* c, Ino ino, std::function<void(bool)> answer) {
  if (!c->opens || c->opens->TryBeginCached(ino)) return answer(true);
  c->waiters.Spawn([c, ino, answer = std::move(answer)] { answer(c->opens->WaitBeginCached(ino)); });
}

bool HandlePassthroughOpen(Ctxt* c, const RawRequest& r) {
  if (!c->opens || !c->opens->enabled() || !PassthroughNegotiated()) return false;
  const fuse_in_header& h = *r.header;
  if (r.arg_size < sizeof(fuse_open_in)) return false;
  fuse_open_in in;
  memcpy(&in, r.arg, sizeof in);
  const int flags = static_cast<int>(in.flags);
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_DIRECT))) return false;
  if (h.nodeid == kAccessLogIno || IsTrashView(h.nodeid)) return false;

  OpTimer timer(kOpOpen, c, h);
  Ctx ctx = RawCtx(h);
  ctx.outside_trash = true;
  const Ino ino = InoIn(c->opts.root, h.nodeid);
  auto opened = c->vfs->Open(ctx, ino, flags);
  if (!opened.ok()) {
    g_reply_err = opened.status().code();  // for the access log
    RawReply(c->se, h.unique, -opened.status().code(), {});
    return true;
  }
  const int dev = fuse_session_fd(c->se);
  if (opened->atime_marked) NotifyInvalAttrs(dev, h.nodeid);  // as OpOpen does
  FuseOpenOutV2 out;
  memset(&out, 0, sizeof out);
  out.fh = opened->fh;
  Vfs::FlatCopy copy = c->vfs->PassthroughCopy(opened->fh);
  int backing = copy.name.empty() ? 0 : c->opens->BeginPassthrough(ino, opened->fh, copy.name, copy.path);
  if (backing > 0) {
    out.open_flags = kFopenPassthrough;  // no FOPEN_KEEP_CACHE: the kernel refuses it here
    out.backing_id = backing;
    // The open found changes this client had not seen: the kernel's cached pages of the
    // file go now, as a caching open without FOPEN_KEEP_CACHE would drop them, or a later
    // caching open (told to keep them) would read them. No READ of the inode can be
    // waiting (it has no caching open), so this cannot block on one.
    if (!opened->keep_cache) fuse_lowlevel_notify_inval_inode(c->se, h.nodeid, 0, 0);
  } else if (opened->keep_cache) {
    out.open_flags |= FOPEN_KEEP_CACHE;
  }
  const uint64_t unique = h.unique, fh = opened->fh;
  auto answer = [c, unique, ino, fh, out](bool ok) {
    if (!ok) {
      c->vfs->Release(fh).ok();
      RawReply(c->se, unique, -ETXTBSY, {});
      return;
    }
    if (RawReply(c->se, unique, 0, {{const_cast<FuseOpenOutV2*>(&out), sizeof out}}) == -ENOENT) {
      c->opens->End(ino, fh);  // interrupted: the kernel will not release it
      c->vfs->Release(fh).ok();
    }
  };
  if (backing > 0) {
    answer(true);
  } else {
    BeginCachedOpen(c, ino, std::move(answer));
  }
  return true;
}

void FillOpen(fuse_file_info* fi, const OpenResult& o) {
  fi->fh = o.fh;
  fi->keep_cache = o.keep_cache ? 1 : 0;
  // O_DIRECT opens are not FOPEN_DIRECT_IO: the kernel then serves them through its own
  // direct-I/O path, which writes back dirty pages before and drops cached ones after
  // every direct write, also when an AIO write completes, and allows mmap of the file
  // (FOPEN_DIRECT_IO refuses shared mappings, and dropped the cache before an AIO write
  // had reached us, so buffered readers could cache the old data again).
  fi->direct_io = 0;
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(kOpOpen, req, ino);
  if (ino == kAccessLogIno) {
    if ((fi->flags & O_ACCMODE) != O_RDONLY) return ReplyErr(req, EACCES);
    if (fuse_req_ctx(req)->uid != 0) return ReplyErr(req, EACCES);  // it shows every user's requests
    fi->fh = AccessLog::Open();
    fi->direct_io = 1;
    fi->nonseekable = 1;
    fi->keep_cache = 0;
    if (fuse_reply_open(req, fi) == -ENOENT) AccessLog::Close(fi->fh);
    return;
  }
  Ctxt* c = static_cast<Ctxt*>(fuse_req_userdata(req));
  auto r = V(req)->Open(MakeCtx(req, ino), In(req, ino), fi->flags);
  if (!r.ok()) return Reply(req, r.status());
  if (r->atime_marked) {
    // Reads the kernel serves from its page cache never reach us, so the open set the
    // access time: the kernel's cached attributes go (only those: offset -1), or stat
    // would show the old time until they expire.
    if (c->se) fuse_lowlevel_notify_inval_inode(c->se, ino, -1, 0);
  }
  FillOpen(fi, *r);
  const Ino vino = In(req, ino);
  const uint64_t fh = r->fh;
  BeginCachedOpen(c, vino, [c, req, vino, fh, f = *fi](bool ok) mutable {
    if (!ok) {
      c->vfs->Release(fh).ok();
      return ReplyErr(req, ETXTBSY);
    }
    if (fuse_reply_open(req, &f) == -ENOENT) {
      c->opens->End(vino, fh);
      c->vfs->Release(fh).ok();
    }
  });
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  OpTimer timer(kOpCreate, req, parent, name);
  auto r = V(req)->Create(MakeCtx(req, parent), In(req, parent), name, mode, fi->flags);
  if (!r.ok()) return Reply(req, r.status());
  Ctxt* c = static_cast<Ctxt*>(fuse_req_userdata(req));
  FillOpen(fi, r->second);
  fuse_entry_param p;
  memset(&p, 0, sizeof p);
  p.ino = Out(req, r->first.ino);
  p.generation = 1;
  ToStat(p.ino, r->first.attr, &p.attr);
  p.attr_timeout = O(req).attr_timeout;
  p.entry_timeout = O(req).entry_timeout;
  NoteReplyName(r->first.ino);
  V(req)->NoteKernelLookup(r->first.ino);
  const Ino ino = r->first.ino;
  const uint64_t fh = r->second.fh;
  // O_CREAT of an existing file may meet passthrough readers of it.
  BeginCachedOpen(c, ino, [c, req, ino, fh, p, f = *fi](bool ok) mutable {
    if (ok && fuse_reply_create(req, &p, &f) != -ENOENT) return;
    if (ok) c->opens->End(ino, fh);
    c->vfs->Forget(ino, 1);
    c->vfs->Release(fh).ok();
    if (!ok) ReplyErr(req, ETXTBSY);
  });
}

}  // namespace tierfs::fuse_internal
