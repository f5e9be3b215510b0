#include "chunk/staging.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "chunk/cache_file.h"
#include "chunk/local_files.h"

namespace tierfs {

namespace {

std::string Hex(uint64_t seq) {
  char buf[17];
  snprintf(buf, sizeof buf, "%016" PRIx64, seq);
  return buf;
}

bool ParseHex(const char* s, uint64_t* out) {
  if (strlen(s) != 16) return false;
  char* end = nullptr;
  errno = 0;
  *out = strtoull(s, &end, 16);
  return errno == 0 && end && *end == '\0';
}

// Reads the header of the staged file at path.
Status ReadHeader(const std::string& path, CacheHeader* h) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Err(errno, "cannot open " + path + ": " + strerror(errno));
  std::string probe(kCacheHeaderProbe, '\0');
  ssize_t n = PreadFull(fd, probe.data(), probe.size(), 0);
  uint32_t need = 0;
  bool ok = n >= 0 && ParseCacheHeader(std::string_view(probe.data(), static_cast<size_t>(n)), h, &need);
  if (!ok && n >= 0 && need > probe.size()) {
    probe.resize(need);
    n = PreadFull(fd, probe.data(), probe.size(), 0);
    ok = n >= 0 && ParseCacheHeader(std::string_view(probe.data(), static_cast<size_t>(n)), h);
  }
  int err = errno;
  close(fd);
  if (n < 0) return Status::Err(err, "cannot read " + path + ": " + strerror(err));
  if (!ok) return Status::Err(EIO, path + " has a damaged header");
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Staging>> Staging::Open(const std::string& dir, std::vector<Entry>* staged,
                                               std::vector<std::string>* damaged) {
  staged->clear();
  damaged->clear();
  RETURN_IF_ERROR(MkdirP(dir, 0700));
  ASSIGN_OR_RETURN(int lock_fd, LockDirectory(dir, "another process uploading this staging area",
                                              "each mount stages in its own --cache-dir"));
  DIR* d = opendir(dir.c_str());
  if (!d) {
    int err = errno;
    close(lock_fd);
    return Status::Err(err, "cannot list " + dir + ": " + strerror(err));
  }
  std::vector<uint64_t> seqs;
  std::vector<std::string> tmps;
  while (dirent* e = readdir(d)) {
    uint64_t seq;
    if (ParseHex(e->d_name, &seq)) {
      seqs.push_back(seq);
    } else if (strncmp(e->d_name, "tmp.", 4) == 0) {
      tmps.push_back(e->d_name);
    }
  }
  closedir(d);
  // A temporary file is a Put that never returned: nothing relies on it.
  for (const auto& t : tmps) unlink((dir + "/" + t).c_str());
  std::sort(seqs.begin(), seqs.end());
  uint64_t next = 1;
  for (uint64_t seq : seqs) {
    next = std::max(next, seq + 1);
    std::string path = dir + "/" + Hex(seq);
    CacheHeader h;
    Status st = ReadHeader(path, &h);
    struct stat sb;
    if (st.ok() && (stat(path.c_str(), &sb) != 0 || static_cast<uint64_t>(sb.st_size) != h.header_len + uint64_t{h.data_len})) {
      st = Status::Err(EIO, path + " is not as long as its header says");
    }
    if (!st.ok()) {
      std::string aside = dir + "/damaged." + Hex(seq);
      spdlog::error("write-back: staged block {} is unusable ({}); moved to {}: its data is lost", path,
                    st.message(), aside);
      rename(path.c_str(), aside.c_str());
      damaged->push_back(aside);
      continue;
    }
    staged->push_back(Entry{seq, h.key, h.data_len});
  }
  return std::unique_ptr<Staging>(new Staging(dir, lock_fd, next));
}

Staging::~Staging() { close(lock_fd_); }

std::string Staging::PathOf(uint64_t seq) const { return dir_ + "/" + Hex(seq); }

Status Staging::Put(uint64_t seq, const std::string& key, std::string_view data) {
  std::string header = EncodeCacheHeader(key, data);
  std::string tmp = dir_ + "/tmp." + Hex(seq);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Err(errno, "cannot create " + tmp + ": " + strerror(errno));
  bool ok = WriteFull(fd, header, data) && fdatasync(fd) == 0;
  int err = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp.c_str(), PathOf(seq).c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(tmp.c_str());
    return Status::Err(err, "cannot stage block " + key + " in " + dir_ + ": " + strerror(err));
  }
  Status st = SyncDirectory(dir_);
  if (!st.ok()) {
    unlink(PathOf(seq).c_str());
    return st.With("staging block " + key);
  }
  return Status::OK();
}

Result<std::string> Staging::Read(const Entry& e) const {
  std::string path = PathOf(e.seq);
  CacheHeader h;
  RETURN_IF_ERROR(ReadHeader(path, &h));
  if (h.key != e.key || h.data_len != e.len) {
    return Status::Err(EIO, path + " holds block " + h.key + ", expected " + e.key);
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Err(errno, "cannot open " + path + ": " + strerror(errno));
  std::string data(e.len, '\0');
  ssize_t n = PreadFull(fd, data.data(), data.size(), h.header_len);
  int err = errno;
  close(fd);
  if (n < 0) return Status::Err(err, "cannot read " + path + ": " + strerror(err));
  if (static_cast<size_t>(n) != data.size()) return Status::Err(EIO, path + " is shorter than its header says");
  if (!VerifyCacheRange(h, 0, {data})) return Status::Err(EIO, path + " fails its checksum");
  return data;
}

void Staging::Remove(uint64_t seq) {
  if (unlink(PathOf(seq).c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("write-back: cannot remove {}: {}", PathOf(seq), strerror(errno));
  }
}

}  // namespace tierfs
