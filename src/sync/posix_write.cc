#include "sync/posix_write.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

namespace tierfs::sync {

std::string TrimKey(const std::string& key) {
  return !key.empty() && key.back() == '/' ? key.substr(0, key.size() - 1) : key;
}

std::string ParentKey(const std::string& key) {
  std::string k = TrimKey(key);
  size_t slash = k.rfind('/');
  return slash == std::string::npos ? "" : k.substr(0, slash);
}

std::string BaseName(const std::string& key) {
  std::string k = TrimKey(key);
  size_t slash = k.rfind('/');
  return slash == std::string::npos ? k : k.substr(slash + 1);
}

mode_t DefaultMode(const Entry& e) {
  static const mode_t um = [] {
    mode_t m = umask(0);
    umask(m);
    return m;
  }();
  mode_t base = e.mode != 0 ? (e.mode & 0777) : (e.kind == Kind::kDir ? 0777 : 0666);
  return base & ~um;
}

Status PumpSource(Source& src, const std::function<Status(uint64_t off, const char* data, size_t n)>& sink) {
  std::string buf(static_cast<size_t>(std::min<uint64_t>(4 << 20, std::max<uint64_t>(src.size, 1))), '\0');
  uint64_t off = 0;
  while (off < src.size) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), src.size - off));
    ASSIGN_OR_RETURN(size_t got, src.reader->Read(off, buf.data(), want));
    if (got < want) return Status::Err(EAGAIN, "the source became shorter while it was copied");
    if (src.on_bytes) src.on_bytes(buf.data(), got);
    RETURN_IF_ERROR(sink(off, buf.data(), got));
    off += got;
  }
  return Status::OK();
}

}  // namespace tierfs::sync
