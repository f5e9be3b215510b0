// io_stress FILE [options]: several processes read and write one file at once through
// every I/O path the kernel has (buffered read/write, O_DIRECT, Linux AIO on O_DIRECT, a
// shared mmap with msync) and check that no read ever returns data older than a write
// that completed before the read began.
//
// The file is cut into page-aligned regions of varied sizes. A write takes its region's
// lock (writes of one region never overlap in time), writes a stamp into every 8-byte word
// of a random sub-range, and on completion publishes, per word, the version it wrote. A
// read takes no lock: before it starts it snapshots the published versions of the words it
// reads, and after it ends the region's newest started version; every word read must hold
// a valid stamp of its own position whose version lies between the two. Truncation runs
// alone (a process-shared rwlock): it cuts the file, checks that the cut part reads back
// as zeros through every path, and rewrites it.
//
// When all processes are done, the whole file must hold exactly the last version written
// to each word (read back buffered and with O_DIRECT). --state F saves those versions;
// `io_stress FILE --verify F` checks the file against them later (after a remount).
//
// Exits 0 when every check passed, 1 with a report (the failing read and the last
// operations of every process) when one did not, 2 on a usage or setup error.
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kKey = 0x9E3779B97F4A7C15ull;  // so an all-zero word is never a valid stamp
constexpr int kLogSize = 48;                      // remembered operations per process
constexpr int kMaxProcs = 16;

enum Method { kBuffered, kDirect, kAio, kMmap, kMethods };
const char* const kMethodNames[kMethods] = {"buffered", "direct", "aio", "mmap"};

// A stamp: the word's index in the file (26 bits: files up to 512 MiB) and the version of
// the write (38 bits), xored with kKey.
uint64_t Stamp(uint64_t word, uint64_t version) { return ((version << 26) | word) ^ kKey; }
bool Unstamp(uint64_t v, uint64_t* word, uint64_t* version) {
  v ^= kKey;
  *word = v & ((1ull << 26) - 1);
  *version = v >> 26;
  return true;
}

struct LogEntry {
  uint64_t seq;     // global order of starts
  int64_t start_us, end_us;
  char what[16];    // "write", "read", "truncate", "fsync", "reopen"
  int method;
  uint64_t off, len, version;
};

struct Region {
  uint64_t off, len;
  pthread_mutex_t mu;        // held by a writer of the region for the whole write
  std::atomic<uint64_t> started;  // newest version a writer began
};

// Shared between the processes (MAP_SHARED | MAP_ANONYMOUS before fork).
struct Shared {
  pthread_rwlock_t file_lock;  // shared by reads and writes, exclusive for truncation
  std::atomic<int> failed;
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> ops[kMaxProcs];
  std::atomic<uint64_t> checked_words;
  LogEntry log[kMaxProcs][kLogSize];
  std::atomic<uint64_t> log_next[kMaxProcs];
  char report[8192];
};

struct Options {
  std::string path;
  int procs = 4;
  double seconds = 20;
  uint64_t seed = 1;
  uint64_t size = 24ull << 20;
  bool truncate = true;
  bool map_direct = true;  // map the file through its O_DIRECT descriptor
  std::string state, verify;
  bool methods[kMethods] = {true, true, true, true};
};

Options g_opt;
Shared* g_sh = nullptr;
Region* g_reg = nullptr;  // shared array of g_nreg regions, in file order
size_t g_nreg = 0;
std::atomic<uint32_t>* g_done = nullptr;  // per word: newest completed version
int64_t g_t0_us = 0;

int64_t NowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000ll + ts.tv_nsec / 1000 - g_t0_us;
}

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "io_stress: %s: %s\n", what, strerror(errno));
  if (g_sh) g_sh->failed = 2;
  _exit(2);
}

void* SharedAlloc(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) Die("mmap shared memory");
  return p;
}

// An I/O buffer: 2 MiB aligned and advised for transparent huge pages (the conformance run
// that found stale reads used hugepage-backed buffers); explicit huge pages when the
// system has some reserved.
char* IoBuffer(size_t n) {
  size_t len = (n + (2u << 20) - 1) & ~((2ul << 20) - 1);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p != MAP_FAILED) return static_cast<char*>(p);
  p = aligned_alloc(2u << 20, len);
  if (!p) Die("allocate I/O buffer");
  madvise(p, len, MADV_HUGEPAGE);
  return static_cast<char*>(p);
}

struct Proc {
  int id;
  std::mt19937_64 rng;
  int fd = -1, dfd = -1;  // buffered and O_DIRECT descriptors
  char* map = nullptr;
  aio_context_t aio = 0;
  char* buf = nullptr;
  std::vector<uint32_t> before;  // published versions snapshotted before a read

  uint64_t Rand(uint64_t n) { return n ? rng() % n : 0; }
};

uint64_t LogStart(Proc& p, const char* what, int method, uint64_t off, uint64_t len, uint64_t version) {
  uint64_t i = g_sh->log_next[p.id].fetch_add(1) % kLogSize;
  LogEntry& e = g_sh->log[p.id][i];
  e.seq = g_sh->seq.fetch_add(1);
  e.start_us = NowUs();
  e.end_us = -1;
  snprintf(e.what, sizeof e.what, "%s", what);
  e.method = method;
  e.off = off;
  e.len = len;
  e.version = version;
  return i;
}

void LogEnd(Proc& p, uint64_t i) { g_sh->log[p.id][i].end_us = NowUs(); }

void Open(Proc& p) {
  p.fd = open(g_opt.path.c_str(), O_RDWR);
  if (p.fd < 0) Die("open");
  p.dfd = open(g_opt.path.c_str(), O_RDWR | O_DIRECT);
  if (p.dfd < 0) Die("open O_DIRECT");
  // Mapped through the O_DIRECT descriptor on purpose: ext4 allows it, and programs that
  // mix both do it.
  p.map = static_cast<char*>(mmap(nullptr, g_opt.size, PROT_READ | PROT_WRITE, MAP_SHARED, g_opt.map_direct ? p.dfd : p.fd, 0));
  if (p.map == MAP_FAILED) Die("mmap of the file opened with O_DIRECT");
}

void Close(Proc& p) {
  munmap(p.map, g_opt.size);
  close(p.fd);
  close(p.dfd);
}

// Transfers [off, off+len) between p.buf and the file with `method`; write or read.
void Transfer(Proc& p, int method, bool write, uint64_t off, uint64_t len) {
  switch (method) {
    case kBuffered:
    case kDirect: {
      int fd = method == kBuffered ? p.fd : p.dfd;
      uint64_t done = 0;
      while (done < len) {
        ssize_t n = write ? pwrite(fd, p.buf + done, len - done, static_cast<off_t>(off + done))
                          : pread(fd, p.buf + done, len - done, static_cast<off_t>(off + done));
        if (n < 0) Die(write ? "pwrite" : "pread");
        if (n == 0) {
          errno = 0;
          Die(write ? "pwrite wrote nothing" : "pread hit end of file inside the file's size");
        }
        done += static_cast<uint64_t>(n);
      }
      return;
    }
    case kAio: {
      // Up to four requests in flight at once, submitted together.
      int parts = 1 + static_cast<int>(p.Rand(4));
      uint64_t step = std::max<uint64_t>(kPage, (len / static_cast<uint64_t>(parts) + kPage - 1) & ~(kPage - 1));
      std::vector<iocb> cbs;
      for (uint64_t at = 0; at < len; at += step) {
        iocb cb;
        memset(&cb, 0, sizeof cb);
        cb.aio_fildes = static_cast<uint32_t>(p.dfd);
        cb.aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
        cb.aio_buf = reinterpret_cast<uint64_t>(p.buf + at);
        cb.aio_nbytes = std::min(step, len - at);
        cb.aio_offset = static_cast<int64_t>(off + at);
        cbs.push_back(cb);
      }
      std::vector<iocb*> ptrs;
      for (auto& cb : cbs) ptrs.push_back(&cb);
      long n = syscall(SYS_io_submit, p.aio, static_cast<long>(ptrs.size()), ptrs.data());
      if (n != static_cast<long>(ptrs.size())) Die("io_submit");
      std::vector<io_event> ev(ptrs.size());
      long got = 0;
      while (got < n) {
        long r = syscall(SYS_io_getevents, p.aio, 1, n - got, ev.data() + got, nullptr);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) Die("io_getevents");
        got += r;
      }
      for (long i = 0; i < n; ++i) {
        const iocb* cb = reinterpret_cast<const iocb*>(ev[static_cast<size_t>(i)].obj);
        if (ev[static_cast<size_t>(i)].res != static_cast<int64_t>(cb->aio_nbytes)) {
          errno = ev[static_cast<size_t>(i)].res < 0 ? static_cast<int>(-ev[static_cast<size_t>(i)].res) : 0;
          Die(write ? "AIO write came back short" : "AIO read came back short");
        }
      }
      return;
    }
    case kMmap:
      if (write) {
        memcpy(p.map + off, p.buf, len);
        // msync wants a page-aligned start.
        uint64_t a = off & ~(kPage - 1);
        if (msync(p.map + a, off + len - a, MS_SYNC) != 0) Die("msync");
      } else {
        memcpy(p.buf, p.map + off, len);
      }
      return;
  }
}

const Region& RegionOf(uint64_t off) {
  size_t lo = 0, hi = g_nreg;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (g_reg[mid].off <= off) lo = mid; else hi = mid;
  }
  return g_reg[lo];
}

void DumpLogs() {
  std::vector<std::pair<int, LogEntry>> all;
  for (int i = 0; i < g_opt.procs; ++i) {
    for (int j = 0; j < kLogSize; ++j) {
      if (g_sh->log[i][j].start_us > 0) all.emplace_back(i, g_sh->log[i][j]);
    }
  }
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.second.seq < b.second.seq; });
  if (all.size() > 80) all.erase(all.begin(), all.end() - 80);
  fprintf(stderr, "last operations (proc: what method [off, +len) version, start..end us):\n");
  for (auto& [i, e] : all) {
    fprintf(stderr, "  p%d: %-8s %-8s [%llu, +%llu) v%llu  %lld..%lld\n", i, e.what, kMethodNames[e.method],
            static_cast<unsigned long long>(e.off), static_cast<unsigned long long>(e.len),
            static_cast<unsigned long long>(e.version), static_cast<long long>(e.start_us),
            static_cast<long long>(e.end_us));
  }
}

void Fail(Proc& p, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void Fail(Proc& p, const char* fmt, ...) {
  int expected = 0;
  if (!g_sh->failed.compare_exchange_strong(expected, 1)) _exit(1);
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(g_sh->report, sizeof g_sh->report, "process %d: ", p.id);
  vsnprintf(g_sh->report + n, sizeof g_sh->report - static_cast<size_t>(n), fmt, ap);
  va_end(ap);
  _exit(1);
}

void Check(Proc& p, int method, uint64_t off, uint64_t len, const char* how, bool exact = false) {
  const uint64_t* words = reinterpret_cast<const uint64_t*>(p.buf);
  for (uint64_t i = 0; i < len / 8; ++i) {
    uint64_t w = off / 8 + i, word, version;
    Unstamp(words[i], &word, &version);
    const Region& r = RegionOf(w * 8);
    uint64_t floor = p.before[i];
    uint64_t newest = exact ? floor : r.started.load();
    if (word != w || version < floor || version > newest) {
      DumpLogs();
      Fail(p,
           "%s %s read of [%llu, +%llu): the word at file offset %llu holds %s (raw %016llx: word %llu, "
           "version %llu); a write of version %llu to it had completed before the read began, and version "
           "%llu is the newest any writer of region [%llu, +%llu) had started when it ended",
           how, kMethodNames[method], static_cast<unsigned long long>(off), static_cast<unsigned long long>(len),
           static_cast<unsigned long long>(w * 8),
           words[i] == 0 ? "zeros" : (word != w ? "another word's stamp" : (version < floor ? "OLDER data" : "a version never written")),
           static_cast<unsigned long long>(words[i]), static_cast<unsigned long long>(word),
           static_cast<unsigned long long>(version), static_cast<unsigned long long>(floor),
           static_cast<unsigned long long>(newest), static_cast<unsigned long long>(r.off),
           static_cast<unsigned long long>(r.len));
    }
  }
  g_sh->checked_words.fetch_add(len / 8, std::memory_order_relaxed);
}

void DoWrite(Proc& p) {
  Region& r = g_reg[p.Rand(g_nreg)];
  int method = static_cast<int>(p.Rand(kMethods));
  while (!g_opt.methods[method]) method = (method + 1) % kMethods;
  // Direct paths move whole pages (as ext4 requires); the others any 8-byte run.
  uint64_t unit = (method == kDirect || method == kAio) ? kPage : 8;
  uint64_t units = r.len / unit;
  uint64_t first = p.Rand(3) == 0 ? 0 : p.Rand(units);
  uint64_t count = p.Rand(3) == 0 ? units - first : 1 + p.Rand(units - first);
  uint64_t off = r.off + first * unit, len = count * unit;
  pthread_mutex_lock(&r.mu);
  uint64_t v = r.started.fetch_add(1) + 1;
  uint64_t* words = reinterpret_cast<uint64_t*>(p.buf);
  for (uint64_t i = 0; i < len / 8; ++i) words[i] = Stamp(off / 8 + i, v);
  uint64_t li = LogStart(p, "write", method, off, len, v);
  Transfer(p, method, true, off, len);
  LogEnd(p, li);
  for (uint64_t i = 0; i < len / 8; ++i) g_done[off / 8 + i].store(static_cast<uint32_t>(v));
  // Often read it straight back, through any path, while no one else may write the
  // region: every word must now hold exactly this version.
  if (p.Rand(3) == 0) {
    int rm = static_cast<int>(p.Rand(kMethods));
    while (!g_opt.methods[rm]) rm = (rm + 1) % kMethods;
    uint64_t ru = (rm == kDirect || rm == kAio) ? kPage : 8;
    uint64_t roff = off / ru * ru, rend = std::min(r.off + r.len, (off + len + ru - 1) / ru * ru);
    p.before.assign((rend - roff) / 8, 0);
    for (uint64_t i = 0; i < p.before.size(); ++i) p.before[i] = g_done[roff / 8 + i].load();
    uint64_t ri = LogStart(p, "readback", rm, roff, rend - roff, v);
    Transfer(p, rm, false, roff, rend - roff);
    LogEnd(p, ri);
    Check(p, rm, roff, rend - roff, "a read-back", true);
  }
  pthread_mutex_unlock(&r.mu);
}

// exact: no write of the read range can be in flight, so every word must hold exactly the
// version published for it.
void DoRead(Proc& p) {
  int method = static_cast<int>(p.Rand(kMethods));
  while (!g_opt.methods[method]) method = (method + 1) % kMethods;
  uint64_t unit = (method == kDirect || method == kAio) ? kPage : 8;
  uint64_t max_len = std::min<uint64_t>(g_opt.size, p.Rand(4) == 0 ? 8ull << 20 : 256ull << 10);
  uint64_t len = std::max(unit, (1 + p.Rand(max_len)) / unit * unit);
  uint64_t off = p.Rand((g_opt.size - len) / unit + 1) * unit;
  p.before.resize(len / 8);
  for (uint64_t i = 0; i < len / 8; ++i) p.before[i] = g_done[off / 8 + i].load();
  uint64_t li = LogStart(p, "read", method, off, len, 0);
  Transfer(p, method, false, off, len);
  LogEnd(p, li);
  Check(p, method, off, len, "a");
}

// Cuts the file at a random page boundary, checks the cut part reads as zeros once it is
// extended again (through every path), then writes it anew. Runs with no other operation.
void DoTruncate(Proc& p) {
  uint64_t cut = p.Rand(g_opt.size / kPage) * kPage;
  uint64_t li = LogStart(p, "truncate", kBuffered, cut, g_opt.size - cut, 0);
  int fd = p.Rand(2) ? p.fd : p.dfd;
  if (ftruncate(fd, static_cast<off_t>(cut)) != 0) Die("ftruncate down");
  if (ftruncate(fd, static_cast<off_t>(g_opt.size)) != 0) Die("ftruncate up");
  LogEnd(p, li);
  for (int m = 0; m < kMethods; ++m) {
    if (!g_opt.methods[m]) continue;
    for (uint64_t at = cut; at < g_opt.size; at += 8ull << 20) {
      uint64_t n = std::min<uint64_t>(8ull << 20, g_opt.size - at);
      Transfer(p, m, false, at, n);
      for (uint64_t i = 0; i < n; ++i) {
        if (p.buf[i] != 0) {
          DumpLogs();
          Fail(p, "after truncating to %llu and extending, a %s read found byte %d at offset %llu (expected zeros)",
               static_cast<unsigned long long>(cut), kMethodNames[m], p.buf[i], static_cast<unsigned long long>(at + i));
        }
      }
    }
  }
  // Rewrite the cut regions whole (buffered), each with a new version.
  for (size_t k = 0; k < g_nreg; ++k) {
    Region& r = g_reg[k];
    if (r.off + r.len <= cut) continue;
    uint64_t v = r.started.fetch_add(1) + 1;
    uint64_t* words = reinterpret_cast<uint64_t*>(p.buf);
    for (uint64_t i = 0; i < r.len / 8; ++i) words[i] = Stamp(r.off / 8 + i, v);
    Transfer(p, kBuffered, true, r.off, r.len);
    for (uint64_t i = 0; i < r.len / 8; ++i) g_done[r.off / 8 + i].store(static_cast<uint32_t>(v));
  }
}

void RunProc(int id, int64_t deadline_us) {
  Proc p;
  p.id = id;
  p.rng.seed(g_opt.seed * 1000003 + static_cast<uint64_t>(id));
  p.buf = IoBuffer(8u << 20);
  if (syscall(SYS_io_setup, 64, &p.aio) != 0) Die("io_setup");
  Open(p);
  while (NowUs() < deadline_us && g_sh->failed == 0) {
    uint64_t dice = p.Rand(1000);
    if (g_opt.truncate && dice < 4) {
      pthread_rwlock_wrlock(&g_sh->file_lock);
      DoTruncate(p);
      pthread_rwlock_unlock(&g_sh->file_lock);
    } else if (dice < 20) {
      uint64_t li = LogStart(p, p.Rand(2) ? "fsync" : "fdatasync", kBuffered, 0, 0, 0);
      if ((p.Rand(2) ? fsync(p.fd) : fdatasync(p.dfd)) != 0) Die("fsync");
      LogEnd(p, li);
    } else if (dice < 35) {
      // Close and open again: a new open decides whether the kernel keeps its cache.
      pthread_rwlock_rdlock(&g_sh->file_lock);
      uint64_t li = LogStart(p, "reopen", kBuffered, 0, 0, 0);
      Close(p);
      Open(p);
      LogEnd(p, li);
      pthread_rwlock_unlock(&g_sh->file_lock);
    } else {
      pthread_rwlock_rdlock(&g_sh->file_lock);
      if (dice < 500) DoWrite(p); else DoRead(p);
      pthread_rwlock_unlock(&g_sh->file_lock);
    }
    g_sh->ops[id].fetch_add(1, std::memory_order_relaxed);
  }
  Close(p);
  _exit(0);
}

// Region sizes: single pages, odd page counts, and runs that straddle 4 MiB block and
// 64 MiB chunk boundaries (whatever the seed, the layout covers every boundary in the file).
std::vector<std::pair<uint64_t, uint64_t>> MakeRegions(std::mt19937_64& rng) {
  static const uint64_t kSizes[] = {1, 1, 2, 3, 16, 17, 64, 255, 1024, 1025};
  std::vector<uint64_t> lens;
  uint64_t at = 0;
  while (at < g_opt.size) {
    uint64_t pages = kSizes[rng() % (sizeof kSizes / sizeof kSizes[0])];
    uint64_t len = std::min(pages * kPage, g_opt.size - at);
    lens.push_back(len);
    at += len;
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  at = 0;
  for (uint64_t len : lens) {
    out.emplace_back(at, len);
    at += len;
  }
  return out;
}

// Every word of the file equals the stamp of done[word]; read with a buffered and an
// O_DIRECT descriptor. Returns false (after printing the first difference) otherwise.
bool VerifyWhole(const std::atomic<uint32_t>* done, uint64_t size) {
  char* buf = IoBuffer(8u << 20);
  for (int direct = 0; direct < 2; ++direct) {
    int fd = open(g_opt.path.c_str(), O_RDONLY | (direct ? O_DIRECT : 0));
    if (fd < 0) Die("open for the final check");
    struct stat st;
    if (fstat(fd, &st) != 0) Die("fstat");
    if (static_cast<uint64_t>(st.st_size) != size) {
      fprintf(stderr, "io_stress: FAILED: the file has %lld bytes, expected %llu\n", static_cast<long long>(st.st_size),
              static_cast<unsigned long long>(size));
      return false;
    }
    for (uint64_t at = 0; at < size; at += 8u << 20) {
      uint64_t n = std::min<uint64_t>(8u << 20, size - at), got = 0;
      while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, static_cast<off_t>(at + got));
        if (r <= 0) Die("final read");
        got += static_cast<uint64_t>(r);
      }
      const uint64_t* words = reinterpret_cast<const uint64_t*>(buf);
      for (uint64_t i = 0; i < n / 8; ++i) {
        uint64_t w = at / 8 + i;
        if (words[i] != Stamp(w, done[w].load())) {
          uint64_t word, version;
          Unstamp(words[i], &word, &version);
          fprintf(stderr,
                  "io_stress: FAILED: %s read of the whole file: the word at offset %llu holds word %llu version %llu "
                  "(raw %016llx); the last write to it was version %u\n",
                  direct ? "an O_DIRECT" : "a buffered", static_cast<unsigned long long>(w * 8),
                  static_cast<unsigned long long>(word), static_cast<unsigned long long>(version),
                  static_cast<unsigned long long>(words[i]), done[w].load());
          return false;
        }
      }
    }
    close(fd);
  }
  return true;
}

int VerifySaved() {
  FILE* f = fopen(g_opt.verify.c_str(), "rb");
  if (!f) Die("open the saved state");
  uint64_t size = 0;
  if (fread(&size, 8, 1, f) != 1 || size == 0 || size > (256ull << 20)) Die("read the saved state");
  std::vector<std::atomic<uint32_t>> done(size / 8);
  std::vector<uint32_t> raw(size / 8);
  if (fread(raw.data(), 4, raw.size(), f) != raw.size()) Die("read the saved state");
  fclose(f);
  for (size_t i = 0; i < raw.size(); ++i) done[i] = raw[i];
  bool ok = VerifyWhole(done.data(), size);
  printf("io_stress: verified %llu MiB against %s: %s\n", static_cast<unsigned long long>(size >> 20),
         g_opt.verify.c_str(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

void Usage() {
  fprintf(stderr,
          "usage: io_stress FILE [--procs N] [--seconds S] [--seed N] [--size MiB] [--no-truncate] [--map-buffered]\n"
          "                      [--state SAVE-TO] | --verify SAVED\n"
          "                      [--methods buffered,direct,aio,mmap]\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Usage();
  g_opt.path = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage();
      return argv[++i];
    };
    if (a == "--procs") g_opt.procs = std::stoi(next());
    else if (a == "--seconds") g_opt.seconds = std::stod(next());
    else if (a == "--seed") g_opt.seed = std::stoull(next());
    else if (a == "--size") g_opt.size = std::stoull(next()) << 20;
    else if (a == "--no-truncate") g_opt.truncate = false;
    else if (a == "--map-buffered") g_opt.map_direct = false;
    else if (a == "--state") g_opt.state = next();
    else if (a == "--verify") g_opt.verify = next();
    else if (a == "--methods") {
      std::string m = next();
      for (int k = 0; k < kMethods; ++k) g_opt.methods[k] = m.find(kMethodNames[k]) != std::string::npos;
    } else Usage();
  }
  if (!g_opt.verify.empty()) return VerifySaved();
  if (g_opt.procs < 1 || g_opt.procs > kMaxProcs || g_opt.size == 0 || g_opt.size > (256ull << 20)) Usage();
  if (std::none_of(g_opt.methods, g_opt.methods + kMethods, [](bool b) { return b; })) Usage();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  g_t0_us = ts.tv_sec * 1000000ll + ts.tv_nsec / 1000 - 1;

  std::mt19937_64 rng(g_opt.seed);
  g_sh = static_cast<Shared*>(SharedAlloc(sizeof(Shared)));
  new (g_sh) Shared();
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED);
  pthread_rwlock_init(&g_sh->file_lock, &ra);
  auto layout = MakeRegions(rng);
  g_nreg = layout.size();
  g_reg = static_cast<Region*>(SharedAlloc(sizeof(Region) * g_nreg));
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  for (size_t i = 0; i < g_nreg; ++i) {
    g_reg[i].off = layout[i].first;
    g_reg[i].len = layout[i].second;
    pthread_mutex_init(&g_reg[i].mu, &ma);
    new (&g_reg[i].started) std::atomic<uint64_t>(0);
  }
  g_done = static_cast<std::atomic<uint32_t>*>(SharedAlloc(sizeof(std::atomic<uint32_t>) * (g_opt.size / 8)));

  // Version 0 of every word, written and synced before the processes start.
  {
    int fd = open(g_opt.path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) Die("create the file");
    std::vector<uint64_t> words(1 << 17);
    for (uint64_t at = 0; at < g_opt.size; at += words.size() * 8) {
      uint64_t n = std::min<uint64_t>(words.size(), (g_opt.size - at) / 8);
      for (uint64_t i = 0; i < n; ++i) words[i] = Stamp(at / 8 + i, 0);
      if (pwrite(fd, words.data(), n * 8, static_cast<off_t>(at)) != static_cast<ssize_t>(n * 8)) Die("pwrite");
    }
    if (fsync(fd) != 0) Die("fsync");
    close(fd);
  }

  int64_t deadline = NowUs() + static_cast<int64_t>(g_opt.seconds * 1e6);
  std::vector<pid_t> kids;
  for (int i = 0; i < g_opt.procs; ++i) {
    pid_t pid = fork();
    if (pid < 0) Die("fork");
    if (pid == 0) RunProc(i, deadline);
    kids.push_back(pid);
  }
  // A hung file system must not hang the test: past the deadline plus a grace period the
  // parent reports what every process was doing and kills them.
  signal(SIGALRM, [](int) {
    const char msg[] = "io_stress: operations still running 60 s after the deadline: the file system hangs\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    DumpLogs();
    kill(0, SIGKILL);
  });
  alarm(static_cast<unsigned>(g_opt.seconds) + 60);
  int worst = 0;
  for (size_t done = 0; done < kids.size();) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      Die("waitpid");
    }
    ++done;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 3;
    if (rc != 0) {
      if (!WIFEXITED(status)) fprintf(stderr, "io_stress: process %d died of signal %d\n", pid, WTERMSIG(status));
      worst = std::max(worst, rc);
      // One failure is enough. The failed process may have held a lock the others wait
      // for, so they are stopped rather than asked to stop.
      if (g_sh->failed == 0) g_sh->failed = rc;
      for (pid_t k : kids) {
        if (k != pid) kill(k, SIGKILL);
      }
    }
  }
  alarm(0);
  if (worst == 0 && !VerifyWhole(g_done, g_opt.size)) worst = 1;
  if (worst == 0 && !g_opt.state.empty()) {
    FILE* f = fopen(g_opt.state.c_str(), "wb");
    if (!f) Die("create the state file");
    uint64_t size = g_opt.size;
    std::vector<uint32_t> raw(size / 8);
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = g_done[i].load();
    if (fwrite(&size, 8, 1, f) != 1 || fwrite(raw.data(), 4, raw.size(), f) != raw.size() || fclose(f) != 0) {
      Die("write the state file");
    }
  }
  uint64_t ops = 0;
  for (int i = 0; i < g_opt.procs; ++i) ops += g_sh->ops[i].load();
  if (g_sh->report[0]) fprintf(stderr, "io_stress: FAILED: %s\n", g_sh->report);
  printf("io_stress: %d processes, seed %llu, %.0f s, %llu MiB file in %zu regions: %llu operations, %llu words "
         "checked: %s\n",
         g_opt.procs, static_cast<unsigned long long>(g_opt.seed), g_opt.seconds,
         static_cast<unsigned long long>(g_opt.size >> 20), g_nreg, static_cast<unsigned long long>(ops),
         static_cast<unsigned long long>(g_sh->checked_words.load()), worst == 0 ? "ok" : "FAILED");
  return worst == 0 ? 0 : (worst == 2 ? 2 : 1);
}
