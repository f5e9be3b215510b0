#include "chunk/flat_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/hash.h"

namespace tierfs {
namespace {

constexpr size_t kStripe = 1 << 20;

bool IsName(const std::string& n) {
  if (n.size() != 32) return false;
  for (char c : n) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The stripe sums of fd's first `size` bytes, then the sum of the list.
Result<std::string> SumsOf(int fd, uint64_t size) {
  std::string sums;
  std::vector<char> buf(kStripe);
  for (uint64_t off = 0; off < size; off += kStripe) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kStripe, size - off));
    size_t got = 0;
    while (got < want) {
      ssize_t n = pread(fd, buf.data() + got, want - got, static_cast<off_t>(off + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::Err(errno, std::string("reading a flat copy: ") + strerror(errno));
      if (n == 0) return Status::Err(EIO, "a flat copy is shorter than its size");
      got += static_cast<size_t>(n);
    }
    uint64_t h = Hash64(std::string_view(buf.data(), want));
    sums.append(reinterpret_cast<const char*>(&h), sizeof h);
  }
  uint64_t all = Hash64(sums);
  sums.append(reinterpret_cast<const char*>(&all), sizeof all);
  return sums;
}

Result<std::string> ReadWhole(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Err(errno, path + ": " + strerror(errno));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Err(errno, strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<FlatFiles>> FlatFiles::Open(const std::string& root, uint64_t capacity,
                                                   double free_space_ratio, int64_t keep_ns) {
  for (const std::string& d : {root, root + "/tmp"}) {
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::Err(errno, "cannot create " + d + ": " + strerror(errno));
    }
  }
  std::unique_ptr<FlatFiles> f(new FlatFiles(root, capacity, free_space_ratio, keep_ns));
  if (DIR* d = opendir((root + "/tmp").c_str())) {  // builds a crash left
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
  }
  DIR* d = opendir(root.c_str());
  if (!d) return Status::Err(errno, "cannot list " + root + ": " + strerror(errno));
  std::vector<std::pair<int64_t, std::string>> found;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (!IsName(n)) continue;
    struct stat st;
    if (fstatat(dirfd(d), n.c_str(), &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
    std::lock_guard<std::mutex> l(f->mu_);
    Copy& c = f->copies_[n];
    c.size = static_cast<uint64_t>(st.st_size);
    f->bytes_ += c.size;
    found.emplace_back(st.st_mtim.tv_sec, n);
  }
  closedir(d);
  // Older copies count as used longer ago (the order eviction goes by).
  std::sort(found.begin(), found.end());
  std::lock_guard<std::mutex> l(f->mu_);
  for (auto& [t, n] : found) f->copies_[n].last_use = ++f->tick_;
  // Checked at once, newest first, so that the first opens after a mount find them ready;
  // a copy an open asks for meanwhile is checked next (Ready moves it to the front).
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    Copy& c = f->copies_[it->second];
    c.queued = true;
    f->jobs_.push_back(Job{it->second, c.size, nullptr});
  }
  f->cv_.notify_all();
  return f;
}

FlatFiles::FlatFiles(std::string root, uint64_t capacity, double free_space_ratio, int64_t keep_ns)
    : root_(std::move(root)), capacity_(capacity), free_space_ratio_(free_space_ratio), keep_ns_(keep_ns) {
  worker_ = std::thread([this] { Loop(); });
}

FlatFiles::~FlatFiles() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

std::string FlatFiles::Ready(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = copies_.find(name);
  if (it == copies_.end()) return "";
  it->second.last_use = ++tick_;
  it->second.used_ns = MonoNanos();
  if (it->second.verified) return PathOf(name);
  if (it->second.size == 0) return "";  // being built
  // A found copy: its check goes first.
  auto job = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.name == name; });
  if (job != jobs_.end()) {
    Job j = std::move(*job);
    jobs_.erase(job);
    jobs_.push_front(std::move(j));
  } else if (!it->second.queued) {
    jobs_.push_front(Job{name, it->second.size, nullptr});
  }
  it->second.queued = true;
  cv_.notify_all();
  return "";
}

bool FlatFiles::WouldBuild(const std::string& name, uint64_t size) const {
  std::lock_guard<std::mutex> l(mu_);
  return !stop_ && !copies_.count(name) && size <= capacity_;
}

void FlatFiles::Want(const std::string& name, uint64_t size, Fill fill) {
  std::lock_guard<std::mutex> l(mu_);
  if (stop_ || copies_.count(name) || size > capacity_) return;
  Copy& c = copies_[name];
  c.size = 0;  // counted once built
  c.queued = true;
  c.last_use = ++tick_;
  c.used_ns = MonoNanos();
  jobs_.push_back(Job{name, size, std::move(fill)});
  cv_.notify_all();
}

void FlatFiles::Erase(const std::string& name) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = copies_.find(name);
    if (it == copies_.end() || it->second.queued) return;
    bytes_ -= it->second.size;
    copies_.erase(it);
  }
  RemoveFiles(name);
}

void FlatFiles::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return stop_ || (jobs_.empty() && !running_); });
}

FlatFilesStats FlatFiles::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  FlatFilesStats s = counts_;
  s.capacity = capacity_;
  s.bytes = bytes_;
  for (const auto& [n, c] : copies_) s.copies += c.size > 0 || c.verified ? 1 : 0;
  return s;
}

void FlatFiles::Loop() {
  pthread_setname_np(pthread_self(), "flat-files");
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    l.unlock();
    Run(job);
    l.lock();
    running_ = false;
    cv_.notify_all();
  }
}

void FlatFiles::Run(Job& job) {
  const bool build = static_cast<bool>(job.fill);
  Status s = build ? Build(job) : Check(job.name, job.size);
  std::lock_guard<std::mutex> l(mu_);
  auto it = copies_.find(job.name);
  if (it == copies_.end()) return;
  it->second.queued = false;
  if (s.ok()) {
    it->second.verified = true;
    if (build) {
      it->second.size = job.size;
      bytes_ += job.size;
      counts_.built++;
    } else {
      counts_.verified++;
    }
    return;
  }
  // A found copy that fails its check, or a build that failed: gone (a build that found
  // no room is quietly forgotten; it may be wanted again later).
  bytes_ -= it->second.size;
  copies_.erase(it);
  if (!build) {
    counts_.damaged++;
    spdlog::warn("flat copy {} failed its check ({}): removed; the file is read through the cache", job.name,
                 s.message());
    RemoveFiles(job.name);
  } else if (s.code() != ENOSPC) {
    counts_.failed++;
    spdlog::info("flat copy {} not built: {}", job.name, s.message());
  } else if (!said_no_room_) {
    said_no_room_ = true;
    spdlog::info("passthrough copies not built: {} (said once)", s.message());
  }
}

bool FlatFiles::MakeRoomLocked(uint64_t need) {
  while (bytes_ + need > capacity_) {
    auto victim = copies_.end();
    for (auto it = copies_.begin(); it != copies_.end(); ++it) {
      if (it->second.queued || it->second.size == 0) continue;
      if (victim == copies_.end() || it->second.last_use < victim->second.last_use) victim = it;
    }
    if (victim == copies_.end()) return false;
    if (victim->second.used_ns != 0 && MonoNanos() - victim->second.used_ns < keep_ns_) return false;
    std::string name = victim->first;
    bytes_ -= victim->second.size;
    copies_.erase(victim);
    counts_.evicted++;
    RemoveFiles(name);
  }
  return true;
}

Status FlatFiles::Build(const Job& job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!MakeRoomLocked(job.size)) return Status::Err(ENOSPC, "no room among the flat copies");
  }
  struct statvfs vs;
  if (statvfs(root_.c_str(), &vs) == 0 && vs.f_blocks > 0) {
    double free_after = static_cast<double>(vs.f_bavail) * static_cast<double>(vs.f_frsize) -
                        static_cast<double>(job.size);
    if (free_after < free_space_ratio_ * static_cast<double>(vs.f_blocks) * static_cast<double>(vs.f_frsize)) {
      return Status::Err(ENOSPC, "the cache disk is at its free-space floor");
    }
  }
  std::string tmp = root_ + "/tmp/" + job.name;
  int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Err(errno, tmp + ": " + strerror(errno));
  auto fail = [&](Status s) {
    close(fd);
    unlink(tmp.c_str());
    return s;
  };
  if (ftruncate(fd, static_cast<off_t>(job.size)) != 0) return fail(Status::Err(errno, strerror(errno)));
  Status s = job.fill(fd);
  if (!s.ok()) return fail(s);
  auto sums = SumsOf(fd, job.size);
  if (!sums.ok()) return fail(sums.status());
  if (fdatasync(fd) != 0) return fail(Status::Err(errno, std::string("fdatasync: ") + strerror(errno)));
  close(fd);
  std::string sums_tmp = tmp + ".sums";
  int sfd = open(sums_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (sfd < 0) return fail(Status::Err(errno, sums_tmp + ": " + strerror(errno)));
  Status ws = WriteAll(sfd, *sums);
  if (ws.ok() && fdatasync(sfd) != 0) ws = Status::Err(errno, strerror(errno));
  close(sfd);
  // The sums go in first: a copy without them is never trusted (Check fails it).
  if (!ws.ok() || rename(sums_tmp.c_str(), (PathOf(job.name) + ".sums").c_str()) != 0 ||
      rename(tmp.c_str(), PathOf(job.name).c_str()) != 0) {
    unlink(sums_tmp.c_str());
    unlink(tmp.c_str());
    return Status::Err(EIO, "cannot store the flat copy " + job.name);
  }
  return Status::OK();
}

Status FlatFiles::Check(const std::string& name, uint64_t size) {
  ASSIGN_OR_RETURN(std::string want, ReadWhole(PathOf(name) + ".sums"));
  int fd = open(PathOf(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Err(errno, std::string("open: ") + strerror(errno));
  auto got = SumsOf(fd, size);
  close(fd);
  if (!got.ok()) return got.status();
  if (*got != want) return Status::Err(EIO, "checksum mismatch");
  return Status::OK();
}

void FlatFiles::RemoveFiles(const std::string& name) {
  unlink(PathOf(name).c_str());
  unlink((PathOf(name) + ".sums").c_str());
}

}  // namespace tierfs
