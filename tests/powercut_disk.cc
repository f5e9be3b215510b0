// powercut_disk IMAGE MOUNTPOINT: a test helper that simulates a power cut under a real file
// system. It serves one file, MOUNTPOINT/disk, whose bytes are IMAGE's. A loop device on
// that file carries an ext4 file system; TierFS keeps its SQLite database and bucket there.
// On SIGUSR1 the "power goes out": from then on every write and flush is acknowledged and
// dropped, so IMAGE keeps exactly what the device had received before the cut, as a disk
// without a volatile cache would after a power loss. The test then recovers the file
// system from IMAGE (journal replay) and checks what TierFS promises.
//
// Direct I/O (no FUSE page cache): every write reaches this process, in order.
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace {

int g_fd = -1;
std::atomic<bool> g_cut{false};
std::atomic<unsigned long> g_dropped{0};
constexpr fuse_ino_t kDiskIno = 2;
constexpr const char* kName = "disk";

void OnCut(int) { g_cut = true; }

bool Stat(fuse_ino_t ino, struct stat* st) {
  memset(st, 0, sizeof *st);
  st->st_ino = ino;
  if (ino == FUSE_ROOT_ID) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
    return true;
  }
  if (ino != kDiskIno) return false;
  struct stat img;
  if (fstat(g_fd, &img) != 0) return false;
  st->st_mode = S_IFREG | 0600;
  st->st_nlink = 1;
  st->st_size = img.st_size;
  st->st_blocks = img.st_blocks;
  return true;
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_entry_param e;
  memset(&e, 0, sizeof e);
  if (parent != FUSE_ROOT_ID || strcmp(name, kName) != 0 || !Stat(kDiskIno, &e.attr)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  e.ino = kDiskIno;
  fuse_reply_entry(req, &e);
}

void Getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  if (!Stat(ino, &st)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_reply_attr(req, &st, 0);
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino != kDiskIno) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  fi->direct_io = 1;
  fuse_reply_open(req, fi);
}

void Read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  static thread_local char* buf = nullptr;
  static thread_local size_t cap = 0;
  if (cap < size) {
    delete[] buf;
    buf = new char[size];
    cap = size;
  }
  ssize_t n = pread(g_fd, buf, size, off);
  if (n < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fuse_reply_buf(req, buf, static_cast<size_t>(n));
}

void Write(fuse_req_t req, fuse_ino_t, const char* data, size_t size, off_t off, fuse_file_info*) {
  if (g_cut) {
    g_dropped++;
    fuse_reply_write(req, size);
    return;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(g_fd, data + done, size - done, off + static_cast<off_t>(done));
    if (n < 0) {
      fuse_reply_err(req, errno);
      return;
    }
    done += static_cast<size_t>(n);
  }
  fuse_reply_write(req, size);
}

void Fsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); }
void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }
void Release(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  char buf[512];
  size_t used = 0;
  struct stat st;
  const char* names[] = {".", "..", kName};
  fuse_ino_t inos[] = {FUSE_ROOT_ID, FUSE_ROOT_ID, kDiskIno};
  for (off_t i = off; i < 3; ++i) {
    memset(&st, 0, sizeof st);
    st.st_ino = inos[i];
    st.st_mode = i < 2 ? S_IFDIR : S_IFREG;
    size_t n = fuse_add_direntry(req, buf + used, sizeof buf - used, names[i], &st, i + 1);
    if (used + n > sizeof buf || used + n > size) break;
    used += n;
  }
  fuse_reply_buf(req, buf, used);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: powercut_disk IMAGE MOUNTPOINT (SIGUSR1 cuts the power)\n");
    return 2;
  }
  g_fd = open(argv[1], O_RDWR | O_CLOEXEC);
  if (g_fd < 0) {
    fprintf(stderr, "powercut_disk: cannot open %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnCut;
  sigaction(SIGUSR1, &sa, nullptr);

  fuse_lowlevel_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.lookup = Lookup;
  ops.getattr = Getattr;
  ops.open = Open;
  ops.read = Read;
  ops.write = Write;
  ops.fsync = Fsync;
  ops.flush = Flush;
  ops.release = Release;
  ops.readdir = Readdir;

  char* fargv[] = {argv[0], const_cast<char*>("-o"), const_cast<char*>("fsname=powercut")};
  fuse_args args = FUSE_ARGS_INIT(3, fargv);
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, nullptr);
  if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[2]) != 0) {
    fprintf(stderr, "powercut_disk: cannot mount on %s\n", argv[2]);
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  int rc = fuse_session_loop(se);  // one thread: requests are applied in arrival order
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  fprintf(stderr, "powercut_disk: %lu writes dropped after the cut\n", g_dropped.load());
  return rc == 0 || rc == SIGINT || rc == SIGTERM || rc == SIGHUP ? 0 : 1;
}
