#include "chunk/cache_folders.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tierfs {

namespace {

int64_t MtimeNs(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// Takes the flock of dir/lock (-1 with *busy when another process holds it; -2 when there is
// no lock file and `create` is false). The descriptor holds the lock until closed. The lock
// file is the one a mount takes (chunk/local_files.h LockDirectory).
int TryLock(const std::string& dir, bool* busy, bool create = false) {
  int fd = open((dir + "/lock").c_str(), create ? O_RDWR | O_CREAT | O_CLOEXEC : O_RDONLY | O_CLOEXEC, 0600);
  if (fd < 0) return -2;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    *busy = errno == EWOULDBLOCK;
    close(fd);
    return -1;
  }
  return fd;
}

// Whether some process holds a flock on the file, read from /proc/locks without taking a
// lock: a probe with flock would itself make a mount that starts at that moment fail to
// take its cache or staging lock.
bool FlockHeld(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream in(line);
    std::string n, type, mode, access, pid, id;
    in >> n >> type;
    if (type == "->") in >> type;  // a waiter
    if (type != "FLOCK") continue;
    in >> mode >> access >> pid >> id;
    unsigned major = 0, minor = 0;
    unsigned long long ino = 0;
    if (std::sscanf(id.c_str(), "%x:%x:%llu", &major, &minor, &ino) != 3) continue;
    if (ino == st.st_ino && major == ::major(st.st_dev) && minor == ::minor(st.st_dev)) return true;
  }
  return false;
}

// Entries of dir/staging other than its lock (0 when there is no staging area).
uint64_t StagedFiles(const std::string& folder) {
  DIR* d = opendir((folder + "/staging").c_str());
  if (d == nullptr) return errno == ENOENT ? 0 : 1;  // unreadable: count it as holding data
  uint64_t n = 0;
  while (const dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != ".." && name != "lock") ++n;
  }
  closedir(d);
  return n;
}

bool LooksLikeOurs(const std::string& folder) {
  for (const char* mark : {"index", "blocks", "lock", "staging"}) {
    if (Exists(folder + "/" + mark)) return true;
  }
  return false;
}

uint64_t TreeBytes(const std::string& folder) {
  namespace fs = std::filesystem;
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fec;
    if (it->is_regular_file(fec)) bytes += it->file_size(fec);
  }
  return bytes;
}

}  // namespace

bool IsVolumeUuid(const std::string& name) {
  if (name.size() != 36) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

std::vector<CacheFolder> ListCacheFolders(const std::vector<std::string>& dirs, bool measure) {
  std::vector<CacheFolder> out;
  for (const std::string& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> names;
    while (const dirent* e = readdir(d)) {
      if (IsVolumeUuid(e->d_name)) names.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      CacheFolder f;
      f.dir = dir;
      f.uuid = name;
      const std::string path = f.path();
      struct stat st;
      if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !LooksLikeOurs(path)) continue;
      for (const char* p : {"", "/index", "/lock", "/clean", "/staging", "/staging/lock"}) {
        f.last_used_ns = std::max(f.last_used_ns, MtimeNs(path + p));
      }
      f.staged_files = StagedFiles(path);
      f.in_use = FlockHeld(path + "/lock") || FlockHeld(path + "/staging/lock");
      if (measure) f.bytes = TreeBytes(path);
      out.push_back(std::move(f));
    }
  }
  return out;
}

Status RemoveCacheFolder(const std::string& dir, const std::string& uuid) {
  const std::string path = dir + "/" + uuid;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Err(ENOENT, "no cache folder " + path);
    return Status::Err(errno, "cannot look at " + path + ": " + strerror(errno));
  }
  if (!IsVolumeUuid(uuid) || !S_ISDIR(st.st_mode) || !LooksLikeOurs(path)) {
    return Status::Err(EINVAL, path + " is not the cache folder of a TierFS volume; left alone");
  }
  // Both locks, held until the folder has its hidden name: no mount starts using it meanwhile
  // (made when missing, so that a mount cannot take one the remover did not hold).
  if (mkdir((path + "/staging").c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Err(errno, "cannot lock " + path + "/staging: " + strerror(errno));
  }
  bool busy = false;
  int cache_lock = TryLock(path, &busy, true);
  int staging_lock = busy ? -1 : TryLock(path + "/staging", &busy, true);
  if (!busy && (cache_lock < 0 || staging_lock < 0)) {
    if (cache_lock >= 0) close(cache_lock);
    if (staging_lock >= 0) close(staging_lock);
    return Status::Err(EACCES, "cannot lock " + path + " to remove it: " + strerror(errno));
  }
  auto unlock = [&] {
    if (cache_lock >= 0) close(cache_lock);
    if (staging_lock >= 0) close(staging_lock);
  };
  if (busy) {
    unlock();
    return Status::Err(EBUSY, path + " is in use by a running mount (or cache server); left alone");
  }
  if (uint64_t staged = StagedFiles(path); staged > 0) {
    unlock();
    return Status::Err(ENOTEMPTY, path + "/staging holds " + std::to_string(staged) +
                                      " files of written data not uploaded yet (not cache): left alone; upload "
                                      "them with `tierfs upload-staged META-URL " + dir + "`");
  }
  const std::string hidden = dir + "/.tierfs-removing-" + uuid + "-" + std::to_string(getpid());
  if (rename(path.c_str(), hidden.c_str()) != 0) {
    int err = errno;
    unlock();
    return Status::Err(err, "cannot remove " + path + ": " + strerror(err));
  }
  unlock();
  std::error_code ec;
  std::filesystem::remove_all(hidden, ec);
  if (ec) return Status::Err(EIO, "removing " + path + " (renamed to " + hidden + ") failed: " + ec.message());
  return Status::OK();
}

}  // namespace tierfs
