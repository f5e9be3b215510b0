#include "chunk/local_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tierfs {

Status MkdirP(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) == 0 || errno == EEXIST) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return Status::Err(errno, path + ": " + strerror(errno));
    if (!S_ISDIR(st.st_mode)) return Status::Err(ENOTDIR, path + " is not a directory");
    return Status::OK();
  }
  if (errno == ENOENT) {
    auto slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      RETURN_IF_ERROR(MkdirP(path.substr(0, slash), mode));
      if (mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return Status::OK();
    }
  }
  return Status::Err(errno, "cannot create " + path + ": " + strerror(errno));
}

ssize_t PreadFull(int fd, char* buf, size_t len, off_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, buf + done, len - done, off + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

void AdvanceIov(iovec* iov, int n, int* idx, size_t done) {
  while (*idx < n && done >= iov[*idx].iov_len) {
    done -= iov[*idx].iov_len;
    iov[*idx].iov_len = 0;
    ++*idx;
  }
  if (*idx < n) {
    iov[*idx].iov_base = static_cast<char*>(iov[*idx].iov_base) + done;
    iov[*idx].iov_len -= done;
  }
}

bool WriteFull(int fd, std::string_view a, std::string_view b) {
  iovec iov[2] = {{const_cast<char*>(a.data()), a.size()}, {const_cast<char*>(b.data()), b.size()}};
  int idx = 0;
  AdvanceIov(iov, 2, &idx, 0);  // skips empty entries
  while (idx < 2) {
    ssize_t n = writev(fd, iov + idx, 2 - idx);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    AdvanceIov(iov, 2, &idx, static_cast<size_t>(n));
  }
  return true;
}

Result<int> LockDirectory(const std::string& dir, const std::string& holder, const std::string& hint) {
  std::string lock_path = dir + "/lock";
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Err(errno, "cannot open " + lock_path + ": " + strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char pid[32] = {0};
    PreadFull(fd, pid, sizeof pid - 1, 0);
    close(fd);
    if (err == EWOULDBLOCK) {
      return Status::Err(EBUSY, dir + " is in use by " + holder + " (pid " + std::string(pid) + "); " + hint);
    }
    return Status::Err(err, "cannot lock " + lock_path + ": " + strerror(err));
  }
  std::string pid = std::to_string(getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    int err = errno;
    close(fd);
    return Status::Err(err, "cannot write " + lock_path + ": " + strerror(err));
  }
  return fd;
}

Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Err(errno, "cannot open " + dir + ": " + strerror(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return Status::Err(err, "cannot sync " + dir + ": " + strerror(err));
  return Status::OK();
}

}  // namespace tierfs
