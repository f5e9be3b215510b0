#include "chunk/slice_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "chunk/block_key.h"
#include "chunk/cached_store.h"
#include "common/io_budget.h"
#include "meta/types.h"

namespace tierfs {

namespace {
// The deletes after a failed upload, all together, wait at most this long for the store.
constexpr int64_t kCleanupBudgetNs = 5000000000;
}  // namespace

SliceWriter::SliceWriter(CachedStore* store, uint64_t id)
    : store_(store), id_(id), block_size_(store->config().block_size) {}

SliceWriter::~SliceWriter() {
  if (state_ == State::kOpen) Abort();
  WaitUploads();
}

bool SliceWriter::Write(uint32_t off, std::string_view data) {
  if (state_ != State::kOpen || off > length_) return false;
  uint64_t end = static_cast<uint64_t>(off) + data.size();
  if (end > kChunkSize) return false;
  if (static_cast<uint64_t>(off) < static_cast<uint64_t>(sent_) * block_size_) return false;
  if (data.empty()) return true;

  const char* src = data.data();
  const uint32_t len = static_cast<uint32_t>(data.size());
  for (const BlockSpan& span : BlockSpans(static_cast<uint32_t>(end), block_size_, off, len)) {
    if (span.index >= bufs_.size()) bufs_.resize(span.index + 1);
    std::string& buf = bufs_[span.index];
    size_t need = static_cast<size_t>(span.offset_in_block) + span.len;
    if (need > buf.size()) {
      // Grow geometrically but never past one block, so a small file holds a small buffer
      // and a full block holds exactly block_size bytes.
      if (need > buf.capacity()) {
        // A write that starts a block and is large looks like a stream: take the whole
        // block at once rather than growing (and copying) several times.
        size_t want = (span.offset_in_block == 0 && span.len >= block_size_ / 8)
                          ? block_size_
                          : std::min<size_t>(block_size_, std::max(need, buf.capacity() * 2));
        std::string bigger = store_->pool()->Take(want);
        bigger.append(buf);
        store_->pool()->Give(std::move(buf));
        buf = std::move(bigger);
      }
      store_->AddBuffered(need - buf.size());
    }
    // Writes are contiguous (off <= length), so a span starts inside or at the end of its
    // buffer: overwrite the part that exists and append the rest (no zero-fill first).
    size_t overlap = std::min<size_t>(span.len, buf.size() - span.offset_in_block);
    std::memcpy(buf.data() + span.offset_in_block, src, overlap);
    if (overlap < span.len) buf.append(src + overlap, span.len - overlap);
    src += span.len;
  }
  length_ = std::max<uint32_t>(length_, static_cast<uint32_t>(end));
  // Stream every block that is full and that this write has reached the end of.
  while (static_cast<uint64_t>(sent_ + 1) * block_size_ <= end) StartNextUpload();
  return true;
}

bool SliceWriter::Read(uint32_t off, uint32_t len, char* dst) {
  if (state_ == State::kAborted || static_cast<uint64_t>(off) + len > length_) return false;
  for (const BlockSpan& span : BlockSpans(length_, block_size_, off, len)) {
    if (span.index >= sent_) {
      std::memcpy(dst, bufs_[span.index].data() + span.offset_in_block, span.len);
    } else {
      std::shared_ptr<const std::string> block;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (span.index < uploading_.size()) block = uploading_[span.index];
      }
      if (!block) return false;
      std::memcpy(dst, block->data() + span.offset_in_block, span.len);
    }
    dst += span.len;
  }
  return true;
}

void SliceWriter::StartNextUpload(bool in_caller) {
  uint32_t index = sent_++;
  std::string& buf = bufs_[index];
  std::string key = BlockKey(store_->config().volume, id_, index, static_cast<uint32_t>(buf.size()));
  sent_keys_.push_back(key);
  // The buffer moves into the shared block that the upload and then the cache hold.
  if (buf.capacity() > 2 * buf.size() && buf.capacity() > 65536) {
    // A short last block in a block-sized buffer: keep a right-sized copy so that the
    // cache's byte count matches the memory it holds.
    std::string fit = store_->pool()->Take(buf.size());
    fit.append(buf);
    store_->pool()->Give(std::move(buf));
    buf = std::move(fit);
  }
  auto data = store_->pool()->Share(std::move(buf));
  buf = std::string();
  bool skip;
  {
    std::lock_guard<std::mutex> l(mu_);
    // After a failure the slice can never be committed: don't spend bandwidth on it.
    skip = !first_error_.ok();
    if (!skip) {
      if (uploading_.size() <= index) uploading_.resize(index + 1);
      uploading_[index] = data;
      ++in_flight_;
    }
  }
  if (skip) {
    store_->ReleaseBuffered(data->size());
    return;
  }
  store_->UploadAsync(
      std::move(key), std::move(data), [this, index](const Status& st) { OnUploadDone(index, st); }, in_caller,
      failed_);
}

void SliceWriter::OnUploadDone(uint32_t index, const Status& status) {
  std::lock_guard<std::mutex> l(mu_);
  uploading_[index].reset();
  if (!status.ok() && first_error_.ok()) {
    first_error_ = status;
    failed_->store(true);  // uploads of this slice not yet started are skipped
  }
  --in_flight_;
  // Notified under mu_: once the writer thread sees in_flight_ == 0 it may destroy cv_.
  cv_.notify_all();
}

void SliceWriter::WaitUploads() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return in_flight_ == 0; });
}

Status SliceWriter::Finish() {
  if (state_ == State::kFinished) return finish_status_;
  if (state_ == State::kAborted) {
    return Status::Err(ECANCELED, "slice " + std::to_string(id_) + " was aborted and cannot be finished");
  }
  state_ = State::kFinished;
  uint32_t blocks = BlockCount(length_, block_size_);
  // The last block goes up in this thread, which waits for the uploads anyway.
  while (sent_ < blocks) StartNextUpload(/*in_caller=*/sent_ + 1 == blocks);
  bufs_.clear();
  WaitUploads();
  {
    std::lock_guard<std::mutex> l(mu_);
    finish_status_ = first_error_;
  }
  if (!finish_status_.ok()) {
    spdlog::warn("slice {} ({} bytes) failed to upload, deleting its blocks: {}", id_, length_,
                 finish_status_.ToString());
    // The store probably fails these too: a short budget, so that the writer (a close)
    // does not wait for a dead store once more; what is left goes to gc.
    ScopedIoBudget quick(ScopedIoBudget::Within(kCleanupBudgetNs));
    DeleteSentBlocks();
  }
  return finish_status_;
}

void SliceWriter::Abort() {
  if (state_ == State::kAborted) return;
  state_ = State::kAborted;
  uint64_t unsent = 0;
  for (uint32_t i = sent_; i < bufs_.size(); ++i) unsent += bufs_[i].size();
  bufs_.clear();
  if (unsent > 0) store_->ReleaseBuffered(unsent);
  WaitUploads();
  DeleteSentBlocks();
}

void SliceWriter::DeleteSentBlocks() {
  if (blocks_deleted_) return;
  blocks_deleted_ = true;
  for (const std::string& key : sent_keys_) {
    Status st = store_->DeleteBlock(key);
    if (!st.ok()) spdlog::warn("slice {}: leaving block {} for garbage collection: {}", id_, key, st.ToString());
  }
}

}  // namespace tierfs
