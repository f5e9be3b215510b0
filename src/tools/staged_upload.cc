#include "tools/staged_upload.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cstring>

#include "chunk/cached_store.h"
#include "chunk/writeback.h"
#include "meta/meta.h"
#include "object/object_store.h"

namespace tierfs {

StagedFiles CountStaged(const std::string& dir) {
  StagedFiles out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (strlen(e->d_name) != 16 || strspn(e->d_name, "0123456789abcdef") != 16) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
    out.blocks++;
    out.bytes += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  return out;
}

bool StagingInUse(const std::string& dir) {
  // The lock Staging::Open takes (chunk/local_files.h LockDirectory), tried without
  // creating anything.
  int fd = open((dir + "/lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return held;
}

Result<StagedUploadResult> UploadStaged(Meta* meta, std::unique_ptr<ObjectStore> store, const std::string& dir,
                                        int threads, std::chrono::seconds stall,
                                        const std::function<void(uint64_t blocks, uint64_t bytes)>& progress) {
  const FormatRecord& fmt = meta->format();
  StoreConfig cfg;
  cfg.volume = fmt.name;
  cfg.block_size = fmt.block_size;
  cfg.cache_bytes = 0;
  CachedStore cached(std::move(store), cfg);
  RETURN_IF_ERROR(cached.StartWriteback(dir, threads));
  // Drain in steps; stop when a step uploaded nothing (the store is not taking blocks).
  const auto step = std::max<std::chrono::milliseconds>(stall, std::chrono::seconds(1));
  uint64_t before = cached.stats().wb_uploaded_blocks;
  WritebackStats left;
  for (;;) {
    left = cached.DrainWriteback(step, [&](const WritebackStats& w) {
      if (progress) progress(w.staged_blocks, w.staged_bytes);
    });
    uint64_t now = cached.stats().wb_uploaded_blocks;
    if (left.staged_blocks == 0 || now == before) break;
    before = now;
  }
  // The marks of every slice whose blocks all landed, also when some others did not.
  RETURN_IF_ERROR(meta->ClearStaged(cached.TakeUploadedMarks()).With("dropping the staged marks"));
  Status pruned = meta->PruneStagingAreas();
  (void)pruned;  // only bookkeeping for status: a later upload or mount prunes again
  StoreStats s = cached.stats();
  StagedUploadResult r;
  r.uploaded_blocks = s.wb_uploaded_blocks;
  r.uploaded_bytes = s.wb_uploaded_bytes;
  r.left_blocks = left.staged_blocks;
  r.left_bytes = left.staged_bytes;
  r.lost = s.wb_lost;
  return r;
}

}  // namespace tierfs
