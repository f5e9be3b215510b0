#include "client/staged_recovery.h"

#include <spdlog/spdlog.h>

#include <cerrno>

#include "client/cache_setup.h"
#include "cmd/util.h"
#include "common/size.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/staged_upload.h"

namespace tierfs::client {

namespace {
// A store that takes no block for this long is down: the mount gives up and says so.
constexpr std::chrono::seconds kStall(60);

std::string HowToRecover(const std::string& dir, const std::string& meta_url) {
  return "they hold data that was written and closed, and exist nowhere else: do not delete " + dir +
         " (it is not cache). Mount read-write once the object store is reachable (the mount uploads them before it "
         "serves), or mount with --writeback (uploads them in the background), or run `tierfs upload-staged " +
         meta_url + " " + dir + "`";
}
}  // namespace

Status RecoverStagedBlocks(const CacheArgs& cache, Meta* meta, bool read_only, const std::string& skip_dir,
                           const std::string& meta_url) {
  const FormatRecord& fmt = meta->format();
  for (const std::string& dir : StagingDirsFor(cache, fmt)) {
    if (dir == skip_dir) continue;
    StagedFiles found = CountStaged(dir);
    if (found.blocks == 0) continue;
    if (StagingInUse(dir)) {
      spdlog::info("{} is in use by another process, which uploads what it holds", dir);
      continue;
    }
    std::string what = std::to_string(found.blocks) + " blocks (" + FormatSize(found.bytes) +
                       ") that a write-back client of this volume staged in " + dir + " are not in the object store";
    if (read_only) return Status::Err(EROFS, what + "; a read-only mount cannot upload them. " + HowToRecover(dir, meta_url));
    spdlog::warn("{}; uploading them before serving", what);
    ASSIGN_OR_RETURN(auto store, OpenStore(fmt));
    auto r = UploadStaged(meta, std::move(store), dir, 8, kStall, [](uint64_t blocks, uint64_t bytes) {
      spdlog::info("staged blocks of an earlier client: {} ({} bytes) still to upload", blocks, bytes);
    });
    if (!r.ok() && r.status().code() == EBUSY) {
      spdlog::info("{} is in use by another process, which uploads what it holds", dir);
      continue;
    }
    if (!r.ok()) return r.status().With(what + "; " + HowToRecover(dir, meta_url));
    if (r->lost > 0) {
      spdlog::error("{} staged blocks in {} could not be read back and are lost (see above); fsck lists the files",
                    r->lost, dir);
    }
    if (r->left_blocks > 0) {
      return Status::Err(EIO, std::to_string(r->left_blocks) + " blocks (" + FormatSize(r->left_bytes) +
                                  ") that a write-back client of this volume staged in " + dir +
                                  " could not be uploaded (the object store took none for " +
                                  std::to_string(kStall.count()) + " s); " + HowToRecover(dir, meta_url));
    }
    spdlog::info("uploaded {} blocks ({} bytes) that an earlier client staged in {}", r->uploaded_blocks,
                 r->uploaded_bytes, dir);
  }
  return Status::OK();
}

std::string StagedNote(const CacheArgs& cache, const FormatRecord& fmt, const std::string& meta_url) {
  for (const std::string& dir : StagingDirsFor(cache, fmt)) {
    StagedFiles found = CountStaged(dir);
    if (found.blocks == 0) continue;
    return "; meanwhile " + std::to_string(found.blocks) + " blocks (" + FormatSize(found.bytes) +
           ") that a write-back client of this volume staged in " + dir + " wait to be uploaded: " +
           HowToRecover(dir, meta_url);
  }
  return "";
}

}  // namespace tierfs::client
