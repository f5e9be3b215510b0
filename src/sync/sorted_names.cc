#include "sync/sorted_names.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tierfs::sync {
namespace {

Status Errno(const std::string& what) { return Status::Err(errno, what + ": " + std::strerror(errno)); }

std::string TempDir() {
  const char* t = getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// An unnamed file in dir, or a named one removed at once where O_TMPFILE is not supported.
int OpenUnnamed(const std::string& dir) {
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string tmpl = dir + "/tierfs-sync-names-XXXXXX";
  fd = mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd >= 0) unlink(tmpl.c_str());
  return fd;
}

}  // namespace

// One sorted run in the temporary file: bytes [pos, end), read kReadBuffer at a time.
struct SortedNames::Run {
  uint64_t pos = 0, end = 0;
  std::string buf;
  size_t at = 0;  // next unread byte of buf
  std::string current;

  // Reads the next name into current; false at the end of the run.
  Result<bool> Advance(int fd) {
    current.clear();
    for (;;) {
      const char* b = buf.data() + at;
      const void* z = memchr(b, '\0', buf.size() - at);
      if (z) {
        size_t n = static_cast<const char*>(z) - b;
        current.append(b, n);
        at += n + 1;
        return true;
      }
      current.append(b, buf.size() - at);
      buf.clear();
      at = 0;
      if (pos == end) {
        if (!current.empty()) return Status::Err(EIO, "a sorted run of names ends inside a name");
        return false;
      }
      size_t want = static_cast<size_t>(std::min<uint64_t>(kReadBuffer, end - pos));
      buf.resize(want);
      ssize_t r = pread(fd, buf.data(), want, static_cast<off_t>(pos));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return r < 0 ? Errno("read the sorted names spilled to " + TempDir())
                               : Status::Err(EIO, "the sorted names spilled to " + TempDir() + " are short");
      buf.resize(static_cast<size_t>(r));
      pos += static_cast<uint64_t>(r);
    }
  }
};

SortedNames::SortedNames(size_t run_names) : run_names_(std::max<size_t>(run_names, 1)) {}

SortedNames::~SortedNames() {
  if (fd_ >= 0) close(fd_);
}

Status SortedNames::Add(std::string name) {
  batch_.push_back(std::move(name));
  if (batch_.size() >= run_names_) return Spill();
  return Status::OK();
}

Status SortedNames::Spill() {
  if (batch_.empty()) return Status::OK();
  std::sort(batch_.begin(), batch_.end());
  if (fd_ < 0) {
    fd_ = OpenUnnamed(TempDir());
    if (fd_ < 0) return Errno("make a temporary file in " + TempDir() + " to sort a large directory's names");
  }
  auto run = std::make_unique<Run>();
  run->pos = file_size_;
  std::string out;
  auto flush = [&]() -> Status {
    for (size_t done = 0; done < out.size();) {
      ssize_t w = pwrite(fd_, out.data() + done, out.size() - done, static_cast<off_t>(file_size_));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Errno("write the sorted names of a large directory to " + TempDir());
      done += static_cast<size_t>(w);
      file_size_ += static_cast<uint64_t>(w);
    }
    out.clear();
    return Status::OK();
  };
  for (const std::string& n : batch_) {
    out.append(n);
    out.push_back('\0');
    if (out.size() >= (1 << 20)) RETURN_IF_ERROR(flush());
  }
  RETURN_IF_ERROR(flush());
  run->end = file_size_;
  runs_.push_back(std::move(run));
  batch_.clear();
  return Status::OK();
}

Status SortedNames::Finish() {
  if (finished_) return Status::OK();
  finished_ = true;
  if (runs_.empty()) {  // all in memory
    std::sort(batch_.begin(), batch_.end());
    return Status::OK();
  }
  RETURN_IF_ERROR(Spill());
  for (auto& r : runs_) {
    ASSIGN_OR_RETURN(bool has, r->Advance(fd_));
    if (has) heap_.push_back(r.get());
  }
  std::make_heap(heap_.begin(), heap_.end(), RunAfter);
  return Status::OK();
}

Result<bool> SortedNames::Next(std::string* name) {
  if (!finished_) RETURN_IF_ERROR(Finish());
  if (runs_.empty()) {
    if (batch_pos_ == batch_.size()) return false;
    *name = std::move(batch_[batch_pos_++]);
    return true;
  }
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), RunAfter);
  Run* r = heap_.back();
  *name = std::move(r->current);
  ASSIGN_OR_RETURN(bool has, r->Advance(fd_));
  if (has) {
    std::push_heap(heap_.begin(), heap_.end(), RunAfter);
  } else {
    heap_.pop_back();
  }
  return true;
}

bool SortedNames::RunAfter(const Run* a, const Run* b) { return a->current > b->current; }

}  // namespace tierfs::sync
