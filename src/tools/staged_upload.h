// Uploading what a write-back client (`mount --writeback`) staged and left behind when it
// stopped without draining (killed, crashed, a host that lost power): its staging area
// (CACHE-DIR/VOLUME-UUID/staging, chunk/staging.h) holds blocks of files that were written
// and closed, that exist nowhere else. Used by `tierfs upload-staged`, and by every mount
// that finds such blocks in one of its cache directories before it serves anything.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace tierfs {

class Meta;
class ObjectStore;

struct StagedFiles {
  uint64_t blocks = 0, bytes = 0;
};

// The staged blocks in dir (files named by a 16-digit sequence number), without opening
// the area (which takes its lock); zero when dir does not exist.
StagedFiles CountStaged(const std::string& dir);
// Whether a running process holds the area (a mount writing back through it), which then
// uploads what it holds itself.
bool StagingInUse(const std::string& dir);

struct StagedUploadResult {
  uint64_t uploaded_blocks = 0, uploaded_bytes = 0;
  uint64_t left_blocks = 0, left_bytes = 0;  // still staged when it gave up
  uint64_t lost = 0;                         // staged files that could not be read back
};

// Uploads every block staged in dir through `store` (the volume's store, checksum layer
// included), on `threads` threads, drops the staged marks of their slices and the staging
// records of sessions with none left. Gives up when no block reached the store for `stall`
// (the store is down): what remains stays staged. EBUSY while another process uses the
// area (a mount staging there).
Result<StagedUploadResult> UploadStaged(Meta* meta, std::unique_ptr<ObjectStore> store, const std::string& dir,
                                        int threads, std::chrono::seconds stall,
                                        const std::function<void(uint64_t blocks, uint64_t bytes)>& progress);

}  // namespace tierfs
