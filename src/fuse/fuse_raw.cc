// Requests libfuse 3.14 does not know, or cannot answer the way TierFS needs, taken raw by
// the session loop (fuse/session_loop.h) before libfuse sees them:
//   FUSE_TMPFILE  open(2) with O_TMPFILE: newer kernels send it, libfuse would answer
//                 ENOSYS. A CREATE without a name (fuse_create_in, then "/"); the answer an
//                 entry and an open file.
//   FUSE_OPEN     read-only opens, when passthrough was negotiated (fuse_open.cc):
//                 the reply carries a backing id libfuse's fuse_open_out has no room for.
//   FUSE_INIT     only looked at (fuse/session_io.h), then left to libfuse.
#include <linux/fuse.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "fuse/fuse_internal.h"
#include "fuse/session_io.h"
#include "fuse/session_loop.h"

namespace tierfs::fuse_internal {
namespace {

// The caller's supplementary groups, as libfuse's fuse_req_getgroups reads them.
std::vector<uint32_t> GroupsOf(uint32_t pid) {
  std::vector<uint32_t> out;
  std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/status";
  FILE* f = fopen(path.c_str(), "re");
  if (!f) return out;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "Groups:", 7) != 0) continue;
    char* p = line + 7;
    char* end;
    for (unsigned long g = strtoul(p, &end, 10); end != p; g = strtoul(p, &end, 10)) {
      out.push_back(static_cast<uint32_t>(g));
      p = end;
    }
    break;
  }
  fclose(f);
  return out;
}

}  // namespace

Ctx RawCtx(const fuse_in_header& h) {
  Ctx ctx;
  ctx.uid = h.uid;
  ctx.gid = h.gid;
  ctx.pid = h.pid;
  uint32_t pid = h.pid;
  ctx.load_groups = [pid] { return GroupsOf(pid); };
  return ctx;
}

namespace {

void ToFuseAttr(Ino ino, const Attr& a, fuse_attr* out) {
  struct stat st;
  ToStat(ino, a, &st);
  memset(out, 0, sizeof *out);
  out->ino = st.st_ino;
  out->size = static_cast<uint64_t>(st.st_size);
  out->blocks = static_cast<uint64_t>(st.st_blocks);
  out->atime = static_cast<uint64_t>(st.st_atim.tv_sec);
  out->mtime = static_cast<uint64_t>(st.st_mtim.tv_sec);
  out->ctime = static_cast<uint64_t>(st.st_ctim.tv_sec);
  out->atimensec = static_cast<uint32_t>(st.st_atim.tv_nsec);
  out->mtimensec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  out->ctimensec = static_cast<uint32_t>(st.st_ctim.tv_nsec);
  out->mode = st.st_mode;
  out->nlink = static_cast<uint32_t>(st.st_nlink);
  out->uid = st.st_uid;
  out->gid = st.st_gid;
  out->rdev = static_cast<uint32_t>(st.st_rdev);
  out->blksize = static_cast<uint32_t>(st.st_blksize);
}

void SplitTimeout(double seconds, uint64_t* sec, uint32_t* nsec) {
  *sec = static_cast<uint64_t>(seconds);
  *nsec = static_cast<uint32_t>((seconds - static_cast<double>(*sec)) * 1e9);
}

void Tmpfile(Ctxt* c, const RawRequest& r) {
  const fuse_in_header& h = *r.header;
  if (r.arg_size < sizeof(fuse_create_in)) {
    RawReply(c->se, h.unique, -EINVAL, {});
    return;
  }
  fuse_create_in in;
  memcpy(&in, r.arg, sizeof in);
  Ctx ctx = RawCtx(h);
  ctx.umask = in.umask;
  OpTimer timer(kOpCreate, c, h);
  auto made = c->vfs->Tmpfile(ctx, InoIn(c->opts.root, h.nodeid), in.mode, static_cast<int>(in.flags));
  if (!made.ok()) {
    RawReply(c->se, h.unique, -made.status().code(), {});
    return;
  }
  const auto& [entry, opened] = *made;
  fuse_entry_out eo;
  memset(&eo, 0, sizeof eo);
  eo.nodeid = InoOut(c->opts.root, entry.ino);
  eo.generation = 1;
  SplitTimeout(c->opts.entry_timeout, &eo.entry_valid, &eo.entry_valid_nsec);
  SplitTimeout(c->opts.attr_timeout, &eo.attr_valid, &eo.attr_valid_nsec);
  ToFuseAttr(eo.nodeid, entry.attr, &eo.attr);
  fuse_open_out oo;
  memset(&oo, 0, sizeof oo);
  oo.fh = opened.fh;
  if (opened.keep_cache) oo.open_flags |= FOPEN_KEEP_CACHE;
  c->vfs->NoteKernelLookup(entry.ino);
  if (c->opens) c->opens->TryBeginCached(entry.ino);  // a new inode: no passthrough open of it exists
  if (RawReply(c->se, h.unique, 0, {{&eo, sizeof eo}, {&oo, sizeof oo}}) == -ENOENT) {
    c->vfs->Forget(entry.ino, 1);
    c->opens->End(entry.ino, opened.fh);
    c->vfs->Release(opened.fh).ok();  // interrupted: the kernel will not release it
  }
}

}  // namespace

bool HandleRawRequest(Ctxt* c, const RawRequest& r) {
  if (r.header->opcode == FUSE_INIT) NoteInitRequest(r);
  if (r.header->opcode == FUSE_OPEN) return HandlePassthroughOpen(c, r);
  if (r.header->opcode != FUSE_TMPFILE) return false;
  Tmpfile(c, r);
  return true;
}

}  // namespace tierfs::fuse_internal
