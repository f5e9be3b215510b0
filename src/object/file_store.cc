#include "object/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <climits>
#include <cstdio>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/clock.h"

namespace tierfs {
namespace {

constexpr char kTempPrefix[] = ".tmp.";
constexpr char kMultipartDir[] = ".multipart";
// The temporary name embeds at most this much of the key's basename, so that it stays
// under NAME_MAX (255) together with the prefix and the random suffix.
constexpr size_t kTempBaseMax = 200;
// Bounds the cache of known directories; it is only an optimization, so when it grows
// past this (a key space with very many directories) it simply starts over.
constexpr size_t kMaxKnownDirs = 100000;
constexpr size_t kCopyBuffer = 1 << 20;
// Objects and the directories holding them are private to the user running tierfs (other
// local users could otherwise read any file of the volume from the bucket).
constexpr mode_t kFileMode = 0600;
constexpr mode_t kDirMode = 0700;
// Missing parents of the bucket directory are made as mkdir -p makes them.
constexpr mode_t kParentDirMode = 0755;

// Closes the descriptor on scope exit unless released.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int get() const { return fd_; }
  int Release() { int fd = fd_; fd_ = -1; return fd; }

 private:
  int fd_;
};

class DirCloser {
 public:
  explicit DirCloser(DIR* d) : d_(d) {}
  ~DirCloser() {
    if (d_ != nullptr) closedir(d_);
  }
  DirCloser(const DirCloser&) = delete;
  DirCloser& operator=(const DirCloser&) = delete;

 private:
  DIR* d_;
};

// 16 hex digits, unique enough across threads and processes to name temporary files and
// uploads (collisions are still caught by O_EXCL / mkdir and retried).
std::string RandomHex() {
  // ThreadRng is seeded again in a forked child (the Python SDK's DataLoader workers fork
  // after their parent made names: with this thread's old state every child drew the same
  // ones, and their probes collided). Mixing in the pid separates processes that share a
  // bucket.
  uint64_t v = ThreadRng()() ^ (static_cast<uint64_t>(getpid()) << 40);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Status ValidateKey(const std::string& key) {
  auto bad = [&](const char* why) {
    return Status::Err(EINVAL, "invalid object key '" + key + "': " + why);
  };
  if (key.empty()) return bad("the key is empty");
  if (key.find('\0') != std::string::npos) return bad("the key contains a NUL byte");
  size_t start = 0;
  bool first = true;
  while (true) {
    size_t end = key.find('/', start);
    std::string_view comp(key.data() + start, (end == std::string::npos ? key.size() : end) - start);
    if (comp.empty()) return bad("empty path component (leading, trailing or doubled '/')");
    if (comp == "." || comp == "..") return bad("'.' and '..' components are not allowed");
    if (comp.starts_with(kTempPrefix)) return bad("components starting with '.tmp.' are reserved");
    if (first && comp == kMultipartDir) return bad("'.multipart/' is reserved");
    if (end == std::string::npos) break;
    start = end + 1;
    first = false;
  }
  return Status::OK();
}

Status ValidateUpload(const std::string& key, const std::string& upload_id) {
  bool hex = !upload_id.empty() && upload_id.size() <= 64 &&
             std::all_of(upload_id.begin(), upload_id.end(),
                         [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!hex) {
    return Status::Err(EINVAL, "invalid multipart upload id '" + upload_id + "' for object " + key);
  }
  return Status::OK();
}

int WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

// Writes every part, with as few system calls as the kernel allows (one writev usually).
int WriteAllParts(int fd, std::vector<std::string_view> parts) {
  while (!parts.empty()) {
    std::vector<iovec> iov;
    for (auto p : parts) iov.push_back({const_cast<char*>(p.data()), p.size()});
    ssize_t n = writev(fd, iov.data(), static_cast<int>(std::min<size_t>(iov.size(), IOV_MAX)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    size_t left = static_cast<size_t>(n);
    while (!parts.empty() && left >= parts.front().size()) {
      left -= parts.front().size();
      parts.erase(parts.begin());
    }
    if (!parts.empty()) parts.front().remove_prefix(left);
  }
  return 0;
}

int FsyncDir(const std::string& dir) {
  int fd = open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = fsync(fd) == 0 ? 0 : errno;
  close(fd);
  return err;
}

std::string DirName(const std::string& path) { return path.substr(0, path.rfind('/')); }

bool IsPermissionError(int err) { return err == EACCES || err == EPERM || err == EROFS; }

}  // namespace

struct FileStore::ListState {
  const std::string& prefix;
  const std::string& start_after;
  size_t limit;
  std::vector<ObjectInfo> out;
  bool Full() const { return limit != 0 && out.size() >= limit; }
};

FileStore::FileStore(std::string root, FileStoreOptions options)
    : root_(std::move(root)), options_(options) {
  while (!root_.empty() && root_.back() == '/') root_.pop_back();
}

FileStore::~FileStore() = default;

std::string FileStore::Describe() const { return "file://" + root_ + "/"; }

std::string FileStore::PathOf(const std::string& key) const { return root_ + "/" + key; }

std::string FileStore::UploadDir(const std::string& upload_id) const {
  return root_ + "/" + kMultipartDir + "/" + upload_id;
}

Status FileStore::IoError(const std::string& what, const std::string& key, int err) const {
  std::string where = "object " + key + " in " + Describe();
  if (err == ENOSPC || err == EDQUOT) {
    return Status::Err(ENOSPC, "cannot " + what + " " + where +
                                   ": no space left on the device (disk full or quota exceeded); "
                                   "free space in the bucket directory or move it to a larger disk");
  }
  if (IsPermissionError(err)) {
    return Status::Err(EACCES, "cannot " + what + " " + where + ": " + std::strerror(err) +
                                   "; check the permissions of the bucket directory");
  }
  return Status::Err(EIO, "cannot " + what + " " + where + ": " + std::strerror(err));
}

void FileStore::ForgetDirs() {
  std::lock_guard<std::mutex> lock(dirs_mu_);
  known_dirs_.clear();
}

int FileStore::MakeDirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return 0;  // the file system root
  {
    std::lock_guard<std::mutex> lock(dirs_mu_);
    if (known_dirs_.count(dir) != 0) return 0;
  }
  auto remember = [&] {
    std::lock_guard<std::mutex> lock(dirs_mu_);
    if (known_dirs_.size() >= kMaxKnownDirs) known_dirs_.clear();
    known_dirs_.insert(dir);
  };
  // EEXIST covers racing creators (other threads or processes). A regular file in the way
  // also gives EEXIST; the following open then fails with ENOTDIR, which is reported.
  if (mkdir(dir.c_str(), mode) == 0 || errno == EEXIST) {
    remember();
    return 0;
  }
  if (errno != ENOENT) return errno;
  size_t slash = dir.rfind('/');
  if (slash == std::string::npos) return ENOENT;
  int err = MakeDirs(dir.substr(0, slash), mode);
  if (err != 0) return err;
  if (mkdir(dir.c_str(), mode) == 0 || errno == EEXIST) {
    remember();
    return 0;
  }
  return errno;
}

int FileStore::CreateTemp(const std::string& path, bool create_dirs, std::string* tmp) {
  std::string dir = DirName(path);
  std::string base = path.substr(dir.size() + 1, kTempBaseMax);
  if (create_dirs) {
    int err = MakeDirs(dir);
    if (err != 0) return -err;
  }
  bool retried_dirs = false;
  for (int attempt = 0; attempt < 8; ++attempt) {
    *tmp = dir + "/" + kTempPrefix + base + "." + RandomHex();
    int fd = open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
    if (fd >= 0) return fd;
    if (errno == EEXIST) continue;
    // A cached directory may have been removed behind our back (by an operator or another
    // process); forget the cache and recreate the directories once.
    if (errno == ENOENT && create_dirs && !retried_dirs) {
      retried_dirs = true;
      ForgetDirs();
      int err = MakeDirs(dir);
      if (err != 0) return -err;
      continue;
    }
    return -errno;
  }
  return -EEXIST;
}

int FileStore::CommitTemp(int fd, const std::string& tmp, const std::string& path) {
  int err = 0;
  if (SyncPuts() && fsync(fd) != 0) err = errno;
  // close() can report a deferred write error (NFS, quotas), so it is checked.
  if (close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    if (unlink(tmp.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("cannot remove temporary file {}: {}", tmp, std::strerror(errno));
    }
    return err;
  }
  if (SyncPuts()) err = FsyncDir(DirName(path));
  return err;
}

int FileStore::WriteAtomic(const std::string& path, const std::vector<std::string_view>& parts, bool create_dirs) {
  std::string tmp;
  int fd = CreateTemp(path, create_dirs, &tmp);
  if (fd < 0) return -fd;
  int err = WriteAllParts(fd, parts);
  if (err != 0) {
    close(fd);
    unlink(tmp.c_str());
    return err;
  }
  return CommitTemp(fd, tmp, path);
}

void FileStore::MakePrivate(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT && mkdir(dir.c_str(), kDirMode) != 0 && errno != EEXIST) {
      spdlog::warn("cannot create bucket directory {}: {}", dir, std::strerror(errno));
    }
    return;
  }
  if (!S_ISDIR(st.st_mode) || (st.st_mode & 077) == 0) return;
  const mode_t was = st.st_mode & 07777, now = st.st_mode & 07700;
  char modes[32];
  std::snprintf(modes, sizeof modes, "mode %04o", static_cast<unsigned>(was));
  if (chmod(dir.c_str(), now) == 0) {
    spdlog::warn("bucket directory {} was open to other users ({}); it is now {:04o}: a volume's objects are "
                 "private to the user running tierfs",
                 dir, modes, static_cast<unsigned>(now));
  } else {
    spdlog::warn("bucket directory {} is open to other users ({}) and cannot be made private ({}): run "
                 "`chmod go= {}` as its owner",
                 dir, modes, std::strerror(errno), dir);
  }
}

Status FileStore::Init() {
  std::string dir = root_.empty() ? "/" : root_;
  ForgetDirs();
  int err = MakeDirs(DirName(root_), kParentDirMode);
  if (err == 0) err = MakeDirs(root_);
  if (err != 0) {
    if (IsPermissionError(err)) {
      return Status::Err(EACCES, "cannot create bucket directory " + dir + ": " + std::strerror(err) +
                                     "; create it yourself or choose a writable path");
    }
    if (err == ENOTDIR) {
      return Status::Err(ENOTDIR, "cannot create bucket directory " + dir +
                                      ": a component of the path is not a directory");
    }
    if (err == ENOSPC || err == EDQUOT) {
      return Status::Err(ENOSPC, "cannot create bucket directory " + dir + ": no space left on the device");
    }
    return Status::Err(EIO, "cannot create bucket directory " + dir + ": " + std::strerror(err));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return Status::Err(EIO, "cannot access bucket directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Err(ENOTDIR, "bucket path " + dir + " exists but is not a directory");
  }
  // Syncing a bucket held in memory only costs system calls: nothing survives a power loss.
  struct statfs fsinfo;
  in_memory_ = statfs(dir.c_str(), &fsinfo) == 0 &&
               (fsinfo.f_type == TMPFS_MAGIC || fsinfo.f_type == RAMFS_MAGIC);
  // Creating a file is the only reliable test: access(W_OK) ignores read-only mounts in
  // some setups and always passes for root.
  std::string probe = root_ + "/" + kTempPrefix + "probe." + RandomHex();
  int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
  if (fd < 0) {
    err = errno;
    if (IsPermissionError(err)) {
      return Status::Err(EACCES, "bucket directory " + dir + " is not writable: " + std::strerror(err));
    }
    if (err == ENOSPC || err == EDQUOT) {
      return Status::Err(ENOSPC, "bucket directory " + dir + " is full: " + std::strerror(err));
    }
    return Status::Err(EIO, "cannot write to bucket directory " + dir + ": " + std::strerror(err));
  }
  close(fd);
  if (unlink(probe.c_str()) != 0) {
    return Status::Err(EIO, "cannot remove probe file " + probe + " from bucket directory " + dir + ": " +
                                std::strerror(errno));
  }
  if (!options_.private_dir.empty() && ValidateKey(options_.private_dir).ok() &&
      options_.private_dir.find('/') == std::string::npos) {
    MakePrivate(root_ + "/" + options_.private_dir);
  }
  std::string multipart = root_ + "/" + kMultipartDir;
  if (access(multipart.c_str(), F_OK) == 0) MakePrivate(multipart);
  return Status::OK();
}

std::optional<StoreSpace> FileStore::Space() const {
  struct statvfs fs;
  if (statvfs(root_.c_str(), &fs) != 0) return std::nullopt;
  StoreSpace space;
  space.total_bytes = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
  space.free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  // What may be written: the room above the floor.
  const auto floor = static_cast<uint64_t>(static_cast<double>(space.total_bytes) * options_.min_free_ratio);
  space.free_bytes = space.free_bytes > floor ? space.free_bytes - floor : 0;
  return space;
}

Status FileStore::CheckRoom(const std::string& key, uint64_t bytes) const {
  if (options_.min_free_ratio <= 0) return Status::OK();
  struct statvfs fs;
  if (statvfs(root_.c_str(), &fs) != 0) return Status::OK();  // the write itself will say what is wrong
  const uint64_t total = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  const auto floor = static_cast<uint64_t>(static_cast<double>(total) * options_.min_free_ratio);
  if (free >= floor && free - floor >= bytes) return Status::OK();
  char pct[32];
  std::snprintf(pct, sizeof pct, "%g%%", options_.min_free_ratio * 100);
  return Status::Err(ENOSPC, "cannot write object " + key + " in " + Describe() + ": its disk keeps " + pct +
                                 " free (" + std::to_string(floor >> 20) + " MiB) and has " +
                                 std::to_string(free >> 20) + " MiB free; free space there (removed files stay "
                                 "in the trash until its retention ends: `tierfs status` shows how much it holds "
                                 "and when it frees it) or mount with a lower --bucket-free-space-ratio");
}

Status FileStore::Sync() {
  // Every Put was synced before it returned, or nothing can survive a power loss anyway.
  if (SyncPuts() || in_memory_) return Status::OK();
  // Group sync: one syncfs covers every object written before it started, so callers that
  // arrive while one runs wait for the next and share it.
  std::unique_lock<std::mutex> l(sync_mu_);
  uint64_t ticket = ++sync_requested_;
  while (sync_done_ < ticket) {
    if (sync_running_) {
      sync_cv_.wait(l);
      continue;
    }
    sync_running_ = true;
    uint64_t target = sync_requested_;
    l.unlock();
    Status st = SyncNow();
    l.lock();
    sync_running_ = false;
    if (st.ok()) sync_done_ = std::max(sync_done_, target);
    sync_cv_.notify_all();
    if (!st.ok()) return st;
  }
  return Status::OK();
}

Status FileStore::SyncNow() {
  std::string dir = root_.empty() ? "/" : root_;
  FdCloser fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    return Status::Err(EIO, "cannot open bucket directory " + dir + " to sync it: " + std::strerror(errno));
  }
  if (syncfs(fd.get()) != 0) {
    int err = errno;
    return Status::Err(err == ENOSPC ? ENOSPC : EIO,
                       "syncing bucket directory " + dir + " to disk failed: " + std::strerror(err));
  }
  return Status::OK();
}

Status FileStore::Put(const std::string& key, std::string_view data) { return PutParts(key, {data}); }

Status FileStore::PutParts(const std::string& key, const std::vector<std::string_view>& parts) {
  RETURN_IF_ERROR(ValidateKey(key));
  uint64_t bytes = 0;
  for (auto p : parts) bytes += p.size();
  RETURN_IF_ERROR(CheckRoom(key, bytes));
  int err = WriteAtomic(PathOf(key), parts, /*create_dirs=*/true);
  if (err == 0) return Status::OK();
  // ENOENT here means a directory vanished twice in a row; it is not a missing object.
  return IoError("write", key, err == ENOENT ? EIO : err);
}

Result<std::string> FileStore::Get(const std::string& key, uint64_t off, int64_t len) {
  RETURN_IF_ERROR(ValidateKey(key));
  auto not_found = [&] { return Status::Err(ENOENT, "object " + key + " not found in " + Describe()); };
  FdCloser fd(open(PathOf(key).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return not_found();
    return IoError("read", key, errno);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return IoError("read", key, errno);
  if (!S_ISREG(st.st_mode)) return not_found();
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (off >= size || len == 0) return std::string();
  uint64_t want = size - off;
  if (len > 0) want = std::min<uint64_t>(want, static_cast<uint64_t>(len));
  std::string buf(want, '\0');
  uint64_t got = 0;
  while (got < want) {
    ssize_t n = pread(fd.get(), buf.data() + got, want - got, static_cast<off_t>(off + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("read", key, errno);
    }
    if (n == 0) break;  // objects are immutable, but tolerate a file shorter than stat said
    got += static_cast<uint64_t>(n);
  }
  buf.resize(got);
  return buf;
}

Result<ObjectInfo> FileStore::Head(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  struct stat st;
  if (stat(PathOf(key).c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return Status::Err(ENOENT, "object " + key + " not found in " + Describe());
    }
    return IoError("stat", key, errno);
  }
  if (!S_ISREG(st.st_mode)) return Status::Err(ENOENT, "object " + key + " not found in " + Describe());
  ObjectInfo info;
  info.key = key;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return info;
}

Status FileStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (unlink(PathOf(key).c_str()) == 0) return Status::OK();
  // A directory (EISDIR) or a path through a regular file (ENOTDIR) is not an object.
  if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) return Status::OK();
  return IoError("delete", key, errno);
}

// rel_dir is "" for the root or a key prefix ending in '/'. Entries are visited in key
// order: a directory D sorts as "D/", which is exactly the prefix of every key below it,
// and no two entries' sort names are prefixes of each other except a file whose name is
// a prefix of another (and that file's single key then correctly sorts first).
Status FileStore::WalkDir(const std::string& rel_dir, ListState* state) {
  std::string full = root_ + "/" + rel_dir;
  DIR* d = opendir(full.c_str());
  if (d == nullptr) {
    // The directory may vanish under a concurrent walk; a missing root has no objects.
    if (errno == ENOENT || errno == ENOTDIR) return Status::OK();
    int err = errno;
    return Status::Err(IsPermissionError(err) ? EACCES : EIO,
                       "cannot list directory " + full + " of " + Describe() + ": " + std::strerror(err));
  }
  DirCloser closer(d);
  struct Entry {
    std::string name;  // with a trailing '/' for directories
    bool is_dir;
  };
  std::vector<Entry> entries;
  const std::string& prefix = state->prefix;
  const std::string& start_after = state->start_after;
  while (true) {
    errno = 0;
    struct dirent* de = readdir(d);
    if (de == nullptr) {
      if (errno != 0) {
        return Status::Err(EIO, "cannot list directory " + full + " of " + Describe() + ": " +
                                    std::strerror(errno));
      }
      break;
    }
    std::string name = de->d_name;
    if (name == "." || name == ".." || name.starts_with(kTempPrefix)) continue;
    if (rel_dir.empty() && name == kMultipartDir) continue;
    bool is_dir;
    if (de->d_type == DT_DIR) {
      is_dir = true;
    } else if (de->d_type == DT_REG) {
      is_dir = false;
    } else if (de->d_type == DT_UNKNOWN) {
      struct stat st;
      if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        is_dir = true;
      } else if (S_ISREG(st.st_mode)) {
        is_dir = false;
      } else {
        continue;
      }
    } else {
      continue;  // symlinks, devices: never written by the store
    }
    std::string key = rel_dir + name;
    if (is_dir) {
      key += '/';
      // Descend only where keys can match the prefix and can sort after start_after.
      if (!key.starts_with(prefix) && !prefix.starts_with(key)) continue;
      if (key < start_after && !start_after.starts_with(key)) continue;
      entries.push_back({name + "/", true});
    } else {
      if (!key.starts_with(prefix) || key <= start_after) continue;
      entries.push_back({std::move(name), false});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  for (const Entry& e : entries) {
    if (state->Full()) break;
    if (e.is_dir) {
      RETURN_IF_ERROR(WalkDir(rel_dir + e.name, state));
      continue;
    }
    struct stat st;
    if (fstatat(dirfd(d), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;  // deleted since readdir
    }
    ObjectInfo info;
    info.key = rel_dir + e.name;
    info.size = static_cast<uint64_t>(st.st_size);
    info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    state->out.push_back(std::move(info));
  }
  return Status::OK();
}

Result<std::vector<ObjectInfo>> FileStore::List(const std::string& prefix, const std::string& start_after,
                                                size_t limit) {
  ListState state{prefix, start_after, limit, {}};
  RETURN_IF_ERROR(WalkDir("", &state));
  return std::move(state.out);
}

Result<std::string> FileStore::CreateMultipart(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  std::string multipart_dir = root_ + "/" + kMultipartDir;
  int err = MakeDirs(multipart_dir);
  bool retried_dirs = false;
  for (int attempt = 0; err == 0 && attempt < 8; ++attempt) {
    std::string id = RandomHex() + RandomHex();
    // mkdir (not MakeDirs) so that an id collision shows up as EEXIST and is retried.
    if (mkdir(UploadDir(id).c_str(), kDirMode) == 0) return id;
    err = errno;
    if (err == EEXIST) {
      err = 0;
    } else if (err == ENOENT && !retried_dirs) {  // .multipart was removed behind our back
      retried_dirs = true;
      ForgetDirs();
      err = MakeDirs(multipart_dir);
    }
  }
  if (err == 0 || err == ENOENT) err = EIO;
  return IoError("start multipart upload of", key, err);
}

Status FileStore::UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                             std::string_view data) {
  RETURN_IF_ERROR(ValidateKey(key));
  RETURN_IF_ERROR(ValidateUpload(key, upload_id));
  if (part_num < 1) {
    return Status::Err(EINVAL, "invalid part number " + std::to_string(part_num) + " for object " + key +
                                   ": parts are numbered from 1");
  }
  RETURN_IF_ERROR(CheckRoom(key, data.size()));
  int err = WriteAtomic(UploadDir(upload_id) + "/" + std::to_string(part_num), {data}, /*create_dirs=*/false);
  if (err == 0) return Status::OK();
  if (err == ENOENT) {
    return Status::Err(ENOENT, "multipart upload " + upload_id + " of object " + key + " not found in " +
                                   Describe() + " (already completed or aborted?)");
  }
  return IoError("upload part " + std::to_string(part_num) + " of", key, err);
}

Status FileStore::CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) {
  RETURN_IF_ERROR(ValidateKey(key));
  RETURN_IF_ERROR(ValidateUpload(key, upload_id));
  if (parts < 1) {
    return Status::Err(EINVAL, "cannot complete multipart upload of object " + key + " with " +
                                   std::to_string(parts) + " parts");
  }
  std::string upload_dir = UploadDir(upload_id);
  struct stat st;
  if (stat(upload_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Err(ENOENT, "multipart upload " + upload_id + " of object " + key + " not found in " +
                                   Describe() + " (already completed or aborted?)");
  }
  std::string path = PathOf(key);
  std::string tmp;
  int out = CreateTemp(path, /*create_dirs=*/true, &tmp);
  if (out < 0) return IoError("write", key, -out == ENOENT ? EIO : -out);
  FdCloser out_fd(out);
  auto fail = [&](Status st) {
    close(out_fd.Release());
    unlink(tmp.c_str());
    return st;
  };
  std::string buf(kCopyBuffer, '\0');
  for (int n = 1; n <= parts; ++n) {
    std::string part_path = upload_dir + "/" + std::to_string(n);
    FdCloser in(open(part_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) {
      if (errno == ENOENT) {
        return fail(Status::Err(EINVAL, "part " + std::to_string(n) + " of multipart upload " + upload_id +
                                            " of object " + key + " was never uploaded"));
      }
      return fail(IoError("read part " + std::to_string(n) + " of", key, errno));
    }
    while (true) {
      ssize_t r = read(in.get(), buf.data(), buf.size());
      if (r < 0) {
        if (errno == EINTR) continue;
        return fail(IoError("read part " + std::to_string(n) + " of", key, errno));
      }
      if (r == 0) break;
      int err = WriteAll(out_fd.get(), std::string_view(buf.data(), static_cast<size_t>(r)));
      if (err != 0) return fail(IoError("write", key, err));
    }
  }
  int err = CommitTemp(out_fd.Release(), tmp, path);
  if (err != 0) return IoError("write", key, err == ENOENT ? EIO : err);
  // The object is complete; failing to clean up only leaves garbage behind.
  Status cleanup = RemoveUploadDir(upload_dir);
  if (!cleanup.ok()) spdlog::warn("multipart upload of {} completed but {}", key, cleanup.message());
  return Status::OK();
}

Status FileStore::AbortMultipart(const std::string& key, const std::string& upload_id) {
  RETURN_IF_ERROR(ValidateKey(key));
  RETURN_IF_ERROR(ValidateUpload(key, upload_id));
  return RemoveUploadDir(UploadDir(upload_id));
}

Status FileStore::RemoveUploadDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return Status::OK();
    return Status::Err(EIO, "cannot remove multipart upload directory " + dir + ": " + std::strerror(errno));
  }
  {
    DirCloser closer(d);
    while (struct dirent* de = readdir(d)) {
      std::string name = de->d_name;
      if (name == "." || name == "..") continue;
      if (unlinkat(dirfd(d), de->d_name, 0) != 0 && errno != ENOENT) {
        return Status::Err(EIO, "cannot remove " + dir + "/" + name + ": " + std::strerror(errno));
      }
    }
  }
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    return Status::Err(EIO, "cannot remove multipart upload directory " + dir + ": " + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace tierfs
