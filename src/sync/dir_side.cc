#include "sync/dir_side.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <vector>

#include "sync/posix_write.h"
#include "sync/sorted_names.h"
#include "sync/temp_name.h"
#include "sync/tree_lister.h"

namespace tierfs::sync {
namespace {

Status Errno(const std::string& what) { return Status::Err(errno, what + ": " + std::strerror(errno)); }

int64_t MtimeNs(const struct stat& st) { return st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec; }

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

class VecDirStream : public DirStream {
 public:
  explicit VecDirStream(std::vector<Entry> v) : v_(std::move(v)) {}
  Result<bool> Next(Entry* e) override {
    if (i_ == v_.size()) return false;
    *e = std::move(v_[i_++]);
    return true;
  }

 private:
  std::vector<Entry> v_;
  size_t i_ = 0;
};

class FdReader : public Reader {
 public:
  FdReader(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Result<size_t> Read(uint64_t off, char* buf, size_t n) override {
    size_t got = 0;
    while (got < n) {
      ssize_t r = pread(fd_.get(), buf + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Errno("read " + path_);
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }

 private:
  Fd fd_;
  std::string path_;
};

bool FillEntry(const struct stat& st, Entry* e) {
  if (S_ISREG(st.st_mode)) {
    e->kind = Kind::kFile;
    e->size = static_cast<uint64_t>(st.st_size);
  } else if (S_ISDIR(st.st_mode)) {
    e->kind = Kind::kDir;
  } else if (S_ISLNK(st.st_mode)) {
    e->kind = Kind::kSymlink;
    e->size = static_cast<uint64_t>(st.st_size);
  } else {
    return false;
  }
  e->mtime_ns = MtimeNs(st);
  e->mode = st.st_mode & 07777;
  e->uid = st.st_uid;
  e->gid = st.st_gid;
  e->dev = st.st_dev;
  e->ino = st.st_ino;
  e->nlink = S_ISDIR(st.st_mode) ? 1 : static_cast<uint32_t>(st.st_nlink);
  return true;
}

// Entry name of directory dfd (path p), false when it is gone or not a file, directory or
// symlink.
Result<bool> StatEntry(int dfd, const std::string& p, const char* name, Entry* e) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return false;  // removed while listed
    return Errno("stat " + p + "/" + name);
  }
  e->key = name;
  if (!FillEntry(st, e)) return false;
  if (e->kind == Kind::kSymlink) {
    std::string t(static_cast<size_t>(st.st_size) + 1, '\0');
    ssize_t n = readlinkat(dfd, name, t.data(), t.size());
    if (n < 0) return false;
    t.resize(static_cast<size_t>(n));
    e->target = t;
  }
  return true;
}

// A directory's entries in name order: its names sorted (sorted_names.h), each stat'ed when
// it is reached; a name removed meanwhile is left out.
class SortedDirStream : public DirStream {
 public:
  SortedDirStream(int dfd, std::string path, std::unique_ptr<SortedNames> names)
      : dfd_(dfd), path_(std::move(path)), names_(std::move(names)) {}
  Result<bool> Next(Entry* e) override {
    std::string name;
    for (;;) {
      ASSIGN_OR_RETURN(bool more, names_->Next(&name));
      if (!more) return false;
      *e = Entry{};
      ASSIGN_OR_RETURN(bool found, StatEntry(dfd_.get(), path_, name.c_str(), e));
      if (found) return true;
    }
  }

 private:
  Fd dfd_;
  std::string path_;
  std::unique_ptr<SortedNames> names_;
};

class DirSide : public Side {
 public:
  explicit DirSide(std::string root) : root_(std::move(root)) {}

  std::string Describe() const override { return "directory " + root_; }
  bool posix() const override { return true; }
  int64_t mtime_precision_ns() const override { return 1; }

  Result<std::unique_ptr<KeyStream>> List(const std::string& start, const Descend& descend,
                                          const Children& children = nullptr) override {
    return ListTree([this](const std::string& dir_key, const NameList& names) { return OpenDir(dir_key, names); },
                    start, descend, list_threads_, children);
  }

  Result<std::unique_ptr<Reader>> Open(const Entry& e) override {
    std::string p = Path(e.key);
    int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return Errno("open " + p);
    return std::unique_ptr<Reader>(new FdReader(fd, p));
  }

  Status Put(const Entry& e, Source& src, bool perms) override {
    std::string dir = Path(ParentKey(e.key));
    std::string tmp = dir + "/" + TempNameFor(BaseName(e.key));
    // The directory is made only when missing (most files land in one that exists).
    int raw = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (raw < 0 && (errno == ENOENT || errno == ENOTDIR)) {
      RETURN_IF_ERROR(MakeDirs(ParentKey(e.key)));
      raw = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    if (raw < 0) return Errno("create " + tmp);
    Fd fd(raw);
    Status st = WriteAll(fd.get(), tmp, src);
    if (st.ok()) st = FileAttrs(fd.get(), tmp, e, perms);
    if (st.ok() && close(dup(fd.get())) != 0) st = Errno("close " + tmp);  // NFS-style errors at close
    if (st.ok() && rename(tmp.c_str(), Path(e.key).c_str()) != 0) st = Errno("rename " + tmp + " to " + Path(e.key));
    if (!st.ok()) unlink(tmp.c_str());
    return st;
  }

  Status Mkdir(const Entry& e) override { return MakeDirs(e.key); }

  void SetListThreads(int n) override { list_threads_ = n; }

  Result<bool> IsDir(const std::string& key) override {
    struct stat st;
    std::string p = Path(TrimKey(key));
    if (lstat(p.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return Errno("stat " + p);
  }

  Status Symlink(const Entry& e, bool perms) override {
    RETURN_IF_ERROR(MakeDirs(ParentKey(e.key)));
    std::string dir = Path(ParentKey(e.key));
    std::string tmp = dir + "/" + TempNameFor(BaseName(e.key));
    if (symlink(e.target.c_str(), tmp.c_str()) != 0) return Errno("symlink " + tmp);
    Status st = PathAttrs(tmp, e, perms);
    if (st.ok() && rename(tmp.c_str(), Path(e.key).c_str()) != 0) st = Errno("rename " + tmp);
    if (!st.ok()) unlink(tmp.c_str());
    return st;
  }

  Status Link(const std::string& existing_key, const std::string& new_key) override {
    RETURN_IF_ERROR(MakeDirs(ParentKey(new_key)));
    std::string tmp = Path(ParentKey(new_key)) + "/" + TempNameFor(BaseName(new_key));
    if (link(Path(existing_key).c_str(), tmp.c_str()) != 0) return Errno("link " + Path(existing_key));
    if (rename(tmp.c_str(), Path(new_key).c_str()) != 0) {
      Status st = Errno("rename " + tmp);
      unlink(tmp.c_str());
      return st;
    }
    return Status::OK();
  }

  Status SetAttrs(const Entry& e, bool perms) override { return PathAttrs(Path(e.key), e, perms); }

  static Status PathAttrs(const std::string& p, const Entry& e, bool perms) {
    if (perms) {
      if (fchownat(AT_FDCWD, p.c_str(), e.uid, e.gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != EPERM)
        return Errno("chown " + p);
      if (e.kind != Kind::kSymlink && chmod(p.c_str(), e.mode) != 0) return Errno("chmod " + p);
    } else if (e.kind == Kind::kDir && e.mode != 0 && chmod(p.c_str(), DefaultMode(e)) != 0) {
      return Errno("chmod " + p);
    }
    struct timespec ts[2];
    ts[0].tv_sec = 0;
    ts[0].tv_nsec = UTIME_OMIT;
    ts[1].tv_sec = e.mtime_ns / 1000000000;
    ts[1].tv_nsec = e.mtime_ns % 1000000000;
    if (utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) return Errno("set the times of " + p);
    return Status::OK();
  }

  Status Remove(const Entry& e) override {
    std::string p = Path(e.key);
    int r = e.is_dir() ? rmdir(p.c_str()) : unlink(p.c_str());
    if (r != 0 && errno != ENOENT) return Errno(std::string(e.is_dir() ? "rmdir " : "unlink ") + p);
    return Status::OK();
  }

  Status RemoveAll(const std::string& key) override {
    std::error_code ec;
    std::filesystem::remove_all(Path(key), ec);
    if (ec) return Status::Err(ec.value(), "remove " + Path(key) + ": " + ec.message());
    return Status::OK();
  }

  Result<std::vector<std::pair<std::string, std::string>>> Xattrs(const Entry& e) override {
    std::string p = Path(e.key);
    std::vector<std::pair<std::string, std::string>> out;
    std::string names(65536, '\0');
    ssize_t n = llistxattr(p.c_str(), names.data(), names.size());
    if (n < 0) {
      if (errno == ENOTSUP) return out;
      return Errno("list the extended attributes of " + p);
    }
    for (size_t i = 0; i < static_cast<size_t>(n);) {
      std::string name(names.c_str() + i);
      i += name.size() + 1;
      if (name.rfind("user.", 0) != 0) continue;  // system.* (ACLs) and trusted.* are the side's own
      std::string value(65536, '\0');
      ssize_t v = lgetxattr(p.c_str(), name.c_str(), value.data(), value.size());
      if (v < 0) {
        if (errno == ENODATA) continue;
        return Errno("read extended attribute " + name + " of " + p);
      }
      value.resize(static_cast<size_t>(v));
      out.emplace_back(name, value);
    }
    return out;
  }

  Status SetXattrs(const Entry& e, const std::vector<std::pair<std::string, std::string>>& x) override {
    std::string p = Path(e.key);
    for (const auto& [name, value] : x) {
      if (lsetxattr(p.c_str(), name.c_str(), value.data(), value.size(), 0) != 0)
        return Errno("set extended attribute " + name + " of " + p);
    }
    return Status::OK();
  }

  Status Flush() override {
    Fd fd(open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0 || syncfs(fd.get()) != 0) return Errno("sync " + root_);
    return Status::OK();
  }

 private:
  std::string Path(const std::string& key) const {
    std::string k = TrimKey(key);
    return k.empty() ? root_ : root_ + "/" + k;
  }

  Status MakeDirs(const std::string& key) {
    std::string k = TrimKey(key);
    if (k.empty()) return Status::OK();
    std::string p = Path(k);
    if (mkdir(p.c_str(), 0755) == 0) return Status::OK();
    if (errno == EEXIST) {
      struct stat st;
      if (stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::OK();
      // A file or symlink where the source has a directory: replaced, as rsync does.
      if (unlink(p.c_str()) != 0 || mkdir(p.c_str(), 0755) != 0) return Errno("replace " + p + " by a directory");
      return Status::OK();
    }
    if (errno != ENOENT) return Errno("mkdir " + p);
    RETURN_IF_ERROR(MakeDirs(ParentKey(k)));
    if (mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + p);
    return Status::OK();
  }

  // All entries of directory dir_key, or only those named (sorted) when names is set.
  Result<std::unique_ptr<DirStream>> OpenDir(const std::string& dir_key, const NameList& names) {
    std::string p = Path(dir_key);
    Fd dfd(open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (dfd.get() < 0 && errno == ENOENT && dir_key.empty()) {  // a dry run's destination, not made
      return std::unique_ptr<DirStream>(new VecDirStream({}));
    }
    if (dfd.get() < 0) return Errno("open directory " + p);
    std::vector<Entry> v;
    if (names) {
      for (const std::string& name : *names) {
        Entry e;
        ASSIGN_OR_RETURN(bool found, StatEntry(dfd.get(), p, name.c_str(), &e));
        if (found) v.push_back(std::move(e));
      }
      return std::unique_ptr<DirStream>(new VecDirStream(std::move(v)));
    }
    DIR* d = fdopendir(dup(dfd.get()));
    if (!d) return Errno("read directory " + p);
    auto sorted = std::make_unique<SortedNames>();
    errno = 0;
    while (struct dirent* de = readdir(d)) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      if (Status st = sorted->Add(de->d_name); !st.ok()) {
        closedir(d);
        return st;
      }
      errno = 0;
    }
    int err = errno;
    closedir(d);
    if (err != 0) return Status::Err(err, "read directory " + p + ": " + std::strerror(err));
    RETURN_IF_ERROR(sorted->Finish());
    return std::unique_ptr<DirStream>(new SortedDirStream(dfd.release(), p, std::move(sorted)));
  }

  static Status WriteAll(int fd, const std::string& path, Source& src) {
    return PumpSource(src, [&](uint64_t, const char* data, size_t n) {
      for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return Errno("write " + path);
        done += static_cast<size_t>(w);
      }
      return Status::OK();
    });
  }

  static Status FileAttrs(int fd, const std::string& path, const Entry& e, bool perms) {
    if (perms) {
      if (fchown(fd, e.uid, e.gid) != 0 && errno != EPERM) return Errno("chown " + path);
      if (fchmod(fd, e.mode) != 0) return Errno("chmod " + path);
    } else if (fchmod(fd, DefaultMode(e)) != 0) {
      return Errno("chmod " + path);
    }
    struct timespec ts[2];
    ts[0].tv_sec = 0;
    ts[0].tv_nsec = UTIME_OMIT;
    ts[1].tv_sec = e.mtime_ns / 1000000000;
    ts[1].tv_nsec = e.mtime_ns % 1000000000;
    if (futimens(fd, ts) != 0) return Errno("set the times of " + path);
    return Status::OK();
  }

  std::string root_;
  int list_threads_ = 1;
};

}  // namespace

Result<std::unique_ptr<Side>> OpenDirSide(const std::string& root_in, bool create, bool may_be_missing) {
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  struct stat st;
  if (stat(root.c_str(), &st) != 0) {
    if (errno == ENOENT && may_be_missing) return std::unique_ptr<Side>(new DirSide(root));
    if (errno != ENOENT || !create) return Errno("cannot use directory " + root);
    if (mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) return Errno("cannot make directory " + root);
  } else if (!S_ISDIR(st.st_mode)) {
    return Status::Err(ENOTDIR, root + " is not a directory");
  }
  return std::unique_ptr<Side>(new DirSide(root));
}

}  // namespace tierfs::sync
