// Directory requests: opendir, readdir(plus) from the directory's snapshot, releasedir and
// fsyncdir. A READDIR(PLUS) reply is filled straight from the snapshot (vfs_dir.cc) until
// the kernel's buffer is full, so listing a directory of N entries costs O(N) in all.
#include <cstring>
#include <vector>

#include "fuse/fuse_internal.h"
#include "fuse/name_hints.h"
#include "metrics/metrics.h"
#include "vfs/vfs.h"

namespace tierfs::fuse_internal {

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(kOpOpendir, req, ino);
  auto r = V(req)->Opendir(MakeCtx(req, ino), In(req, ino));
  if (!r.ok()) return Reply(req, r.status());
  fi->fh = *r;
  fi->cache_readdir = 0;
  if (fuse_reply_open(req, fi) == -ENOENT) V(req)->Releasedir(*r).ok();
}

// One READDIR(PLUS) reply: entries are encoded straight from the directory snapshot into
// the kernel's buffer until it is full (vfs_dir.cc), each once, plus the one that did not
// fit, which the next request starts with.
void DoReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  OpTimer timer(kOpReaddir, req, ino);
  static metrics::Counter& encoded = metrics::Default().GetCounter(
      "tierfs_readdir_entries_total", "Directory entries taken from directory snapshots and encoded into READDIR replies",
      {{"step", "encoded"}});
  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  size_t used = 0;
  const Ino dir = In(req, ino);
  Status st = V(req)->Readdir(MakeCtx(req), fi->fh, static_cast<uint64_t>(off), plus,
                              [&](const DirEntry& e, uint64_t next) {
    encoded.Add();
    size_t n;
    if (plus) {
      fuse_entry_param p;
      memset(&p, 0, sizeof p);
      bool dots = e.name == "." || e.name == "..";
      if (!dots && e.attr.mode == 0) {
        // Removed between listing and attribute load: show the name without attributes.
        p.attr.st_ino = Out(req, e.ino);
        p.attr.st_mode = e.type;
      } else {
        const uint64_t kino = dots ? Out(req, e.ino) : OutEntry(req, e.ino, e.attr);
        ToStat(kino, e.attr, &p.attr);
        if (!dots) {
          p.ino = kino;
          p.generation = 1;
          p.attr_timeout = O(req).attr_timeout;
          p.entry_timeout = EntryTimeout(req, e.attr);
        }
      }
      n = fuse_add_direntry_plus(req, buf.data() + used, size - used, e.name.c_str(), &p, static_cast<off_t>(next));
      if (n > size - used) return false;
      // The kernel takes a lookup of every entry with an inode number.
      if (p.ino && S_ISREG(e.attr.mode)) V(req)->NoteKernelLookup(e.ino);
      // The kernel now knows the name: no lookup follows. (An entry that did not fit was
      // not handed over.)
      if (p.ino) NoteName(e.ino, dir, e.name);
    } else {
      struct stat stt;
      memset(&stt, 0, sizeof stt);
      stt.st_ino = Out(req, e.ino);
      stt.st_mode = e.type;
      n = fuse_add_direntry(req, buf.data() + used, size - used, e.name.c_str(), &stt, static_cast<off_t>(next));
      if (n > size - used) return false;
    }
    used += n;
    return true;
  });
  if (!st.ok()) return Reply(req, st);
  fuse_reply_buf(req, buf.data(), used);
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  DoReaddir(req, ino, size, off, fi, false);
}
void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  DoReaddir(req, ino, size, off, fi, true);
}

void OpReleasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(kOpReleasedir, req, ino);
  Reply(req, V(req)->Releasedir(fi->fh));
}

void OpFsyncdir(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info*) {
  OpTimer timer(kOpFsync, req, ino);
  Reply(req, V(req)->FsyncDir());
}

}  // namespace tierfs::fuse_internal
