#include "chunk/cache_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "chunk/cache_file.h"
#include "chunk/local_files.h"
#include "common/buffer_pool.h"
#include "common/clock.h"
#include "common/encoding.h"

namespace tierfs {

namespace {

// An operation on the cache's disk slower than this takes the directory out of use.
constexpr int64_t kStallNs = 10'000'000'000;
constexpr size_t kRecord = 16;
uint32_t NowMs() { return static_cast<uint32_t>(MonoNanos() / 1'000'000); }

std::string Hex(uint64_t fp) {
  char buf[17];
  snprintf(buf, sizeof buf, "%016" PRIx64, fp);
  return buf;
}

}  // namespace

Result<std::unique_ptr<CacheDir>> CacheDir::Open(const std::string& dir, const std::string& uuid, uint64_t capacity,
                                                 double free_space_ratio, uint32_t correlated_ms) {
  if (uuid.empty() || uuid.find('/') != std::string::npos) return Status::Err(EINVAL, "bad volume uuid");
  std::string root = dir + "/" + uuid;
  RETURN_IF_ERROR(MkdirP(root, 0700));
  RETURN_IF_ERROR(MkdirP(root + "/tmp", 0700));
  for (int i = 0; i < 256; ++i) {
    char sub[8];
    snprintf(sub, sizeof sub, "/%02x", i);
    RETURN_IF_ERROR(MkdirP(root + "/blocks" + sub, 0700));
  }
  ASSIGN_OR_RETURN(int fd, LockDirectory(root, "another mount of this volume", "give each mount its own --cache-dir"));
  std::unique_ptr<CacheDir> d(new CacheDir(root, capacity, free_space_ratio, correlated_ms, fd));
  struct stat ist;
  bool fresh = stat((root + "/index").c_str(), &ist) != 0;
  bool clean = unlink((root + "/clean").c_str()) == 0 || fresh;
  int64_t t0 = MonoNanos();
  bool damaged = false;
  RETURN_IF_ERROR(d->Replay(&damaged));
  clean = clean && !damaged;  // files the lost records named are orphans now
  spdlog::info("disk cache {}: {} blocks, {} bytes, index read in {:.1f} ms{}", root, d->policy_.count(),
               d->policy_.bytes(), (MonoNanos() - t0) / 1e6, clean ? "" : "; not closed cleanly, sweeping orphans");
  if (!clean) d->sweeper_ = std::thread([p = d.get()] { p->Sweep(); });
  return d;
}

CacheDir::CacheDir(std::string root, uint64_t capacity, double free_space_ratio, uint32_t correlated_ms, int lock_fd)
    : root_(std::move(root)), free_space_ratio_(free_space_ratio), lock_fd_(lock_fd), policy_(capacity, correlated_ms) {}

CacheDir::~CacheDir() {
  stopping_ = true;
  if (sweeper_.joinable()) sweeper_.join();
  bool ok = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (journal_fd_ >= 0 && !down_) {
      CompactLocked();
      ok = journal_fd_ >= 0 && !down_;
    }
    if (journal_fd_ >= 0) close(journal_fd_);
    journal_fd_ = -1;
  }
  if (ok) {
    int fd = open((root_ + "/clean").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  close(lock_fd_);
}

std::string CacheDir::BlockPath(uint64_t fp) const {
  char sub[4];
  snprintf(sub, sizeof sub, "%02x", static_cast<unsigned>(fp & 0xff));
  return root_ + "/blocks/" + sub + "/" + Hex(fp);
}

Status CacheDir::Replay(bool* damaged) {
  std::string path = root_ + "/index";
  journal_fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (journal_fd_ < 0) return Status::Err(errno, "cannot open " + path + ": " + strerror(errno));
  struct stat st;
  if (fstat(journal_fd_, &st) != 0) return Status::Err(errno, "cannot stat " + path);
  std::string buf(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = PreadFull(journal_fd_, buf.data(), buf.size(), 0);
  if (n < 0) return Status::Err(errno, "cannot read " + path + ": " + strerror(errno));
  size_t good = 0;
  for (size_t pos = 0; pos + kRecord <= static_cast<size_t>(n); pos += kRecord) {
    ByteReader r(std::string_view(buf).substr(pos, kRecord));
    char op = static_cast<char>(r.U8());
    r.U8();
    r.U16();
    uint32_t size = r.U32();
    uint64_t fp = r.U64();
    if (op == 'A') {
      policy_.Restore(fp, size);
    } else if (op == 'D') {
      policy_.Erase(fp);
    } else {
      spdlog::warn("disk cache {}: index damaged at byte {}; keeping what precedes it", root_, pos);
      *damaged = true;
      break;
    }
    good = pos + kRecord;
  }
  journal_records_ = good / kRecord;
  if (good != static_cast<size_t>(st.st_size) && ftruncate(journal_fd_, static_cast<off_t>(good)) != 0) {
    return Status::Err(errno, "cannot truncate " + path + ": " + strerror(errno));
  }
  std::lock_guard<std::mutex> l(mu_);
  std::vector<uint64_t> evicted;
  policy_.Trim(policy_.capacity(), &evicted);  // the capacity may have shrunk since
  JournalEvicted(evicted);
  if (journal_records_ > 2 * policy_.count() + 4096) CompactLocked();
  Unlink(evicted);
  return Status::OK();
}

void CacheDir::Journal(char op, uint64_t fp, uint64_t size) {
  if (journal_fd_ < 0) return;
  std::string rec;
  rec.reserve(kRecord);
  PutU8(&rec, static_cast<uint8_t>(op));
  PutU8(&rec, 0);
  PutU16(&rec, 0);
  PutU32(&rec, static_cast<uint32_t>(size));
  PutU64(&rec, fp);
  if (write(journal_fd_, rec.data(), rec.size()) != static_cast<ssize_t>(rec.size())) {
    MarkDown(std::string("cannot append to its index: ") + strerror(errno));
    return;
  }
  ++journal_records_;
}

void CacheDir::JournalEvicted(const std::vector<uint64_t>& evicted) {
  for (uint64_t fp : evicted) Journal('D', fp, 0);
  evictions_ += evicted.size();
}

void CacheDir::CompactLocked() {
  std::string out;
  auto entries = policy_.Entries();
  out.reserve(entries.size() * kRecord);
  for (const auto& [fp, size] : entries) {
    PutU8(&out, 'A');
    PutU8(&out, 0);
    PutU16(&out, 0);
    PutU32(&out, static_cast<uint32_t>(size));
    PutU64(&out, fp);
  }
  std::string tmp = root_ + "/index.new", path = root_ + "/index";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || !WriteFull(fd, out, {}) || fdatasync(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    MarkDown(std::string("cannot rewrite its index: ") + strerror(err));
    return;
  }
  close(fd);
  close(journal_fd_);
  journal_fd_ = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (journal_fd_ < 0) MarkDown(std::string("cannot reopen its index: ") + strerror(errno));
  journal_records_ = entries.size();
}

void CacheDir::Unlink(const std::vector<uint64_t>& fps) {
  for (uint64_t fp : fps) unlink(BlockPath(fp).c_str());
}

void CacheDir::MarkDown(const std::string& why) {
  errors_++;
  if (!down_.exchange(true)) {
    spdlog::error("disk cache {} taken out of use: {}; reads go on from the object store", root_, why);
  }
}

bool CacheDir::Stalled(int64_t start_ns, const char* what) {
  int64_t took = MonoNanos() - start_ns;
  if (took < kStallNs) return false;
  std::lock_guard<std::mutex> l(mu_);
  MarkDown(std::string(what) + " took " + std::to_string(took / 1'000'000) + " ms");
  return true;
}

bool CacheDir::Contains(uint64_t fp) const {
  if (down_) return false;
  std::lock_guard<std::mutex> l(mu_);
  return policy_.Contains(fp);
}

void CacheDir::Drop(uint64_t fp, const char* why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++corrupt_;
    ++misses_;
    if (policy_.Erase(fp)) Journal('D', fp, 0);
  }
  spdlog::warn("disk cache {}: block file {} {}; dropped, reading from the object store", root_, Hex(fp), why);
  unlink(BlockPath(fp).c_str());
}

int CacheDir::OpenBlock(uint64_t fp, const std::string& key, uint32_t block_len, CacheHeader* h) {
  std::string path = BlockPath(fp);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      Drop(fp, "is missing");
    } else {
      std::lock_guard<std::mutex> l(mu_);
      MarkDown("cannot open " + path + ": " + strerror(errno));
    }
    return -1;
  }
  std::string probe(kCacheHeaderProbe, '\0');
  ssize_t n = PreadFull(fd, probe.data(), probe.size(), 0);
  uint32_t need = 0;
  bool ok = n >= 0 && ParseCacheHeader(std::string_view(probe.data(), static_cast<size_t>(n)), h, &need);
  if (!ok && n >= 0 && need > probe.size()) {
    probe.resize(need);
    n = PreadFull(fd, probe.data(), probe.size(), 0);
    ok = n >= 0 && ParseCacheHeader(std::string_view(probe.data(), static_cast<size_t>(n)), h);
  }
  if (n < 0) {
    int err = errno;
    close(fd);
    std::lock_guard<std::mutex> l(mu_);
    MarkDown("cannot read " + path + ": " + strerror(err));
    return -1;
  }
  if (!ok || h->key != key || h->data_len != block_len) {
    close(fd);
    Drop(fp, ok ? "holds another block" : "has a damaged header");
    return -1;
  }
  return fd;
}

int CacheDir::Lookup(uint64_t fp, const std::string& key, uint32_t block_len, CacheHeader* h) {
  if (down_) return -1;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!policy_.Touch(fp, NowMs())) {
      ++misses_;
      return -1;
    }
  }
  return OpenBlock(fp, key, block_len, h);
}

bool CacheDir::Read(uint64_t fp, const std::string& key, uint32_t block_len, uint32_t off, uint32_t len, char* dst) {
  if (len == 0 || static_cast<uint64_t>(off) + len > block_len) return false;
  int64_t t0 = MonoNanos();
  CacheHeader h;
  int fd = Lookup(fp, key, block_len, &h);
  if (fd < 0) return false;
  return ReadOpen(fd, fp, h, block_len, off, len, dst, t0);
}

bool CacheDir::ReadOpen(int fd, uint64_t fp, const CacheHeader& h, uint32_t block_len, uint32_t off, uint32_t len,
                        char* dst, int64_t t0) {
  // Read whole segments: the partial ones at both ends into scratch, the rest into dst.
  uint64_t from = off / h.segment * static_cast<uint64_t>(h.segment);
  uint64_t to = std::min<uint64_t>(block_len, (static_cast<uint64_t>(off) + len + h.segment - 1) / h.segment * h.segment);
  std::string head(off - from, '\0'), tail(to - off - len, '\0');
  iovec iov[3] = {{head.data(), head.size()}, {dst, len}, {tail.data(), tail.size()}};
  size_t want = to - from, got = 0;
  off_t pos = static_cast<off_t>(h.header_len + from);
  int idx = 0, err = 0;
  AdvanceIov(iov, 3, &idx, 0);  // skips empty entries
  while (got < want) {
    ssize_t n = preadv(fd, iov + idx, 3 - idx, pos + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
    AdvanceIov(iov, 3, &idx, static_cast<size_t>(n));
  }
  close(fd);
  if (err != 0) {
    std::lock_guard<std::mutex> l(mu_);
    MarkDown("cannot read " + BlockPath(fp) + ": " + strerror(err));
    return false;
  }
  if (got < want) {
    Drop(fp, "is shorter than its header says");
    return false;
  }
  if (!VerifyCacheRange(h, from, {head, std::string_view(dst, len), tail})) {
    Drop(fp, "fails its checksum");
    return false;
  }
  Stalled(t0, "a read");
  std::lock_guard<std::mutex> l(mu_);
  ++hits_;
  return true;
}

std::shared_ptr<const std::string> CacheDir::ReadBlock(uint64_t fp, const std::string& key, uint32_t block_len,
                                                     BufferPool* pool) {
  if (block_len == 0) return nullptr;
  int64_t t0 = MonoNanos();
  CacheHeader h;
  int fd = Lookup(fp, key, block_len, &h);
  if (fd < 0) return nullptr;  // a miss allocates nothing (prefetches of cold blocks ask first)
  // Measured on a 1 GiB stream from a cache on tmpfs: zero-filling a fresh 4 MiB string and
  // faulting its pages in took about a fifth of the client's CPU; a recycled buffer needs
  // neither.
  std::string data = pool ? pool->TakeSized(block_len) : std::string(block_len, '\0');
  if (!ReadOpen(fd, fp, h, block_len, 0, block_len, data.data(), t0)) {
    if (pool) pool->Give(std::move(data));
    return nullptr;
  }
  if (pool) return pool->Share(std::move(data));
  return std::make_shared<const std::string>(std::move(data));
}

bool CacheDir::CheckFreeSpace(uint64_t incoming) {
  if (free_space_ratio_ <= 0) return true;
  struct statvfs sv;
  if (statvfs(root_.c_str(), &sv) != 0) return true;
  uint64_t total = static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize;
  uint64_t avail = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  uint64_t floor = static_cast<uint64_t>(free_space_ratio_ * static_cast<double>(total));
  if (avail >= floor + incoming) {
    std::lock_guard<std::mutex> l(mu_);
    if (space_low_) {
      space_low_ = false;
      spdlog::info("disk cache {}: the disk has room again; caching resumes", root_);
    }
    return true;
  }
  uint64_t need = floor + incoming - avail;
  std::vector<uint64_t> evicted;
  bool enough;
  {
    std::lock_guard<std::mutex> l(mu_);
    enough = policy_.bytes() >= need;
    policy_.Trim(policy_.bytes() > need ? policy_.bytes() - need : 0, &evicted);
    JournalEvicted(evicted);
    if (!enough && !space_low_) {
      // Said once per episode: otherwise a cache that silently stops filling looks like a
      // cache that does not work.
      space_low_ = true;
      spdlog::warn("disk cache {}: {} of {} bytes free on its disk, under the --free-space-ratio floor of {:.0f}%, "
                   "and the cache holds too little to make room; blocks are not cached until the disk has room",
                   root_, avail, total, free_space_ratio_ * 100);
    }
  }
  Unlink(evicted);
  return enough;
}

bool CacheDir::Write(uint64_t fp, const std::string& key, std::string_view data, const std::vector<uint32_t>* sums) {
  if (down_) return false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (policy_.Contains(fp) || data.size() > policy_.capacity()) return false;
  }
  std::string header = EncodeCacheHeader(key, data, sums);
  if (!CheckFreeSpace(header.size() + data.size())) return false;
  int64_t t0 = MonoNanos();
  static std::atomic<uint64_t> seq{0};
  std::string tmp = root_ + "/tmp/" + Hex(fp) + "." + std::to_string(seq++);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && WriteFull(fd, header, data);
  int err = errno;
  if (fd >= 0 && close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp.c_str(), BlockPath(fp).c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(tmp.c_str());
    std::vector<uint64_t> evicted;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (err == ENOSPC || err == EDQUOT) {
        // The disk filled up under the configured capacity: shrink to what fits.
        uint64_t cap = policy_.bytes() / 10 * 9;
        if (policy_.capacity() > cap) {
          spdlog::warn("disk cache {}: disk full at {} bytes cached; shrinking the cache to {}", root_,
                       policy_.bytes(), cap);
          policy_.set_capacity(cap);
        }
        policy_.Trim(cap, &evicted);
        JournalEvicted(evicted);
      } else {
        MarkDown("cannot write " + tmp + ": " + strerror(err));
      }
    }
    Unlink(evicted);
    return false;
  }
  std::vector<uint64_t> evicted;
  bool kept;
  {
    std::lock_guard<std::mutex> l(mu_);
    kept = policy_.Insert(fp, data.size(), &evicted, NowMs());
    if (kept) {
      Journal('A', fp, data.size());
      ++writes_;
    }
    JournalEvicted(evicted);
    if (journal_records_ > 2 * policy_.count() + 4096) CompactLocked();
  }
  Unlink(evicted);
  if (!kept) unlink(BlockPath(fp).c_str());
  Stalled(t0, "a write");
  return kept;
}

void CacheDir::Erase(uint64_t fp) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!policy_.Erase(fp)) return;
    Journal('D', fp, 0);
  }
  unlink(BlockPath(fp).c_str());
}

void CacheDir::Sweep() {
  uint64_t removed = 0;
  auto sweep_dir = [&](const std::string& path, bool all) {
    DIR* d = opendir(path.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      bool orphan = all;
      if (!all) {
        char* end = nullptr;
        uint64_t fp = strtoull(e->d_name, &end, 16);
        std::lock_guard<std::mutex> l(mu_);
        orphan = *end != '\0' || !policy_.Contains(fp);
      }
      if (orphan && unlinkat(dirfd(d), e->d_name, 0) == 0) ++removed;
    }
    closedir(d);
  };
  sweep_dir(root_ + "/tmp", true);
  for (int i = 0; i < 256 && !down_ && !stopping_; ++i) {
    char sub[8];
    snprintf(sub, sizeof sub, "/%02x", i);
    sweep_dir(root_ + "/blocks" + sub, false);
  }
  spdlog::info("disk cache {}: orphan sweep removed {} files", root_, removed);
}

void CacheDir::WaitSweep() {
  if (sweeper_.joinable()) sweeper_.join();
}

CacheDirStats CacheDir::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  CacheDirStats s;
  s.hits = hits_;
  s.misses = misses_;
  s.evictions = evictions_;
  s.writes = writes_;
  s.corrupt = corrupt_;
  s.errors = errors_;
  s.bytes = policy_.bytes();
  s.blocks = policy_.count();
  s.capacity = policy_.capacity();
  s.down = down_;
  return s;
}

}  // namespace tierfs
