// SliceWriter: buffers one slice being written and streams its blocks to the object store.
//
// The slice is contiguous from offset 0: writes append at length() or overwrite buffered
// bytes. As soon as a block is full and a write has reached its end, its upload starts on
// the CachedStore's upload pool, so a sequential writer streams while the application keeps
// writing. Finish uploads the rest and waits; only after Finish succeeds may the caller
// commit the slice to metadata (upload first, commit second).
//
// Threads: one writer thread at a time calls the public methods (the vfs writer that owns
// it); upload completions arrive on upload-pool threads and touch only state guarded by
// mu_. The CachedStore must outlive the writer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tierfs {

class CachedStore;

class SliceWriter {
 public:
  // Without a prior Finish (or Abort), the destructor aborts: it waits for in-flight
  // uploads and deletes the blocks already uploaded. After Finish it only waits.
  ~SliceWriter();
  SliceWriter(const SliceWriter&) = delete;
  SliceWriter& operator=(const SliceWriter&) = delete;

  uint64_t id() const { return id_; }
  // Bytes written so far: the slice covers [0, length()).
  uint32_t length() const { return length_; }

  // Copies data into the slice at off, which must be <= length(). Returns false and writes
  // nothing if the range touches a block whose upload already started, if off + size passes
  // kChunkSize, if off > length(), or after Finish/Abort: the caller then starts a new
  // slice. May block while the upload queue is full (backpressure).
  bool Write(uint32_t off, std::string_view data);

  // Copies bytes [off, off+len) of the slice from memory: buffered blocks and blocks whose
  // upload is still running. Returns false (dst contents unspecified) if any of it is no
  // longer in memory or is past length(); uploaded blocks can then be read through
  // CachedStore::ReadSlice(id(), length(), ...).
  bool Read(uint32_t off, uint32_t len, char* dst);

  // Uploads every remaining block (the last one with its real length), waits for all the
  // slice's uploads and returns the first error, naming the object key. On error the blocks
  // already uploaded are deleted, so nothing of the slice is left to commit. Calling Finish
  // again returns the same status; after Abort it returns ECANCELED.
  Status Finish();

  // Stops the writer, waits for in-flight uploads, and deletes every block already uploaded
  // (also after a successful Finish, e.g. when the metadata commit failed). Idempotent.
  void Abort();

 private:
  friend class CachedStore;
  SliceWriter(CachedStore* store, uint64_t id);

  // Writer thread. Hands block `sent_` to the upload pool and advances sent_.
  void StartNextUpload(bool in_caller = false);
  // Upload thread.
  void OnUploadDone(uint32_t index, const Status& status);
  void WaitUploads();
  // Deletes the blocks handed to the upload pool, from the store and the cache.
  void DeleteSentBlocks();

  enum class State { kOpen, kFinished, kAborted };

  CachedStore* const store_;
  const uint64_t id_;
  const uint32_t block_size_;

  // Writer thread only.
  State state_ = State::kOpen;
  uint32_t length_ = 0;
  uint32_t sent_ = 0;                    // blocks [0, sent_) were handed to the upload pool
  std::vector<std::string> bufs_;        // buffers of blocks [sent_, ...); earlier ones empty
  std::vector<std::string> sent_keys_;   // object key of each block in [0, sent_)
  bool blocks_deleted_ = false;
  Status finish_status_;

  // Shared with upload threads.
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  Status first_error_;
  // Set with first_error_; read by uploads when they start (CachedStore::UploadAsync).
  std::shared_ptr<std::atomic<bool>> failed_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::shared_ptr<const std::string>> uploading_;  // by block, while the put runs
};

}  // namespace tierfs
