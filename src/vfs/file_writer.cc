#include "vfs/file_writer.h"

#include "chunk/cached_store.h"
#include "chunk/slice_writer.h"
#include "common/clock.h"
#include "meta/meta.h"

namespace tierfs {

namespace {
// More open slices than this in one file means random writes: commit them before going on,
// so metadata and memory stay bounded.
constexpr size_t kMaxOpenSlices = 64;
}  // namespace

FileWriter::FileWriter(Ino ino, Meta* meta, CachedStore* store, CommitHook hook,
                       std::function<void(uint32_t chunk)> committed)
    : ino_(ino), meta_(meta), store_(store), hook_(std::move(hook)), committed_(std::move(committed)) {}

FileWriter::~FileWriter() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& s : slices_) s.writer->Abort();
}

Status FileWriter::Write(uint64_t off, const char* data, size_t len) {
  std::lock_guard<std::mutex> l(mu_);
  if (!error_.ok()) return error_;
  if (off + len > kMaxFileSize) return Status::Err(EFBIG, "write beyond the 1 PiB file size limit");
  if (dirty_since_ns_ == 0) dirty_since_ns_ = MonoNanos();
  dirty_ = true;
  uint64_t pos = off;
  size_t done = 0;
  while (done < len) {
    uint32_t chunk = static_cast<uint32_t>(pos >> kChunkBits);
    uint32_t in_chunk = static_cast<uint32_t>(pos & (kChunkSize - 1));
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(len - done, kChunkSize - in_chunk));
    Status st = WritePiece(chunk, in_chunk, data + done, n);
    if (!st.ok()) {
      error_ = st;
      return st;
    }
    done += n;
    pos += n;
  }
  pending_length_ = std::max(pending_length_.load(), off + len);
  // In the 4 KiB blocks st_blocks counts (as Meta counts a commit).
  pending_bytes_ += ((off + len + 4095) / 4096 - off / 4096) * 4096;
  if (slices_.size() > kMaxOpenSlices) return FlushLocked();
  return Status::OK();
}

Status FileWriter::WritePiece(uint32_t chunk, uint32_t pos, const char* data, uint32_t len) {
  // Newest slice first; a slice may take the write only if no newer slice of the chunk
  // overlaps the range (the newer one would shadow it at commit).
  uint64_t end = static_cast<uint64_t>(pos) + len;
  for (size_t i = slices_.size(); i-- > 0;) {
    OpenSlice& s = slices_[i];
    if (s.chunk != chunk) continue;
    uint64_t s_end = static_cast<uint64_t>(s.pos) + s.writer->length();
    if (pos >= s.pos && pos <= s_end) {
      if (s.writer->Write(pos - s.pos, std::string_view(data, len))) return Status::OK();
      break;
    }
    if (pos < s_end && s.pos < end) break;  // overlaps a newer slice that can't take it
  }
  ASSIGN_OR_RETURN(uint64_t id, meta_->NewSliceId());
  OpenSlice s{chunk, pos, store_->NewSliceWriter(id)};
  if (!s.writer->Write(0, std::string_view(data, len))) {
    return Status::Err(EIO, "internal error: a new slice refused its first write");
  }
  slices_.push_back(std::move(s));
  return Status::OK();
}

Status FileWriter::Flush() {
  std::lock_guard<std::mutex> l(mu_);
  return FlushLocked();
}

void FileWriter::Discard() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& s : slices_) s.writer->Abort();
  bool had_slices = !slices_.empty();
  slices_.clear();
  pending_length_ = 0;
  pending_bytes_ = 0;
  dirty_since_ns_ = 0;
  error_ = Status::OK();
  if (hook_ && had_slices) hook_(nullptr);
  dirty_ = false;
}

Status FileWriter::FlushLocked() {
  if (!dirty_) return Status::OK();
  Status first = error_;
  int64_t now = NowNanos();
  Attr attr;
  bool committed = false;
  if (hook_ && !slices_.empty()) hook_(nullptr);
  size_t i = 0;
  for (; i < slices_.size() && first.ok(); ++i) {
    OpenSlice& s = slices_[i];
    Status st = s.writer->Finish();
    if (st.ok()) {
      SliceRecord rec;
      rec.pos = s.pos;
      rec.id = s.writer->id();
      rec.size = s.writer->length();
      rec.off = 0;
      rec.len = rec.size;
      uint64_t end = static_cast<uint64_t>(s.chunk) * kChunkSize + s.pos + rec.len;
      // With write-back the blocks may be only staged here yet: the commit marks that, so
      // that other clients wait for the upload instead of reporting them missing.
      bool staged = store_->SliceStaged(rec.id);
      // A small slice staged whole may go into a pack as it uploads (chunk/writeback.h).
      bool packable = staged && store_->PackableSize(rec.size);
      if (packable) rec.flags = kRecordMayBePacked;
      st = meta_->WriteSlice(ino_, s.chunk, rec, end, now, &attr, staged);
      if (st.ok()) committed = true;
      if (st.ok() && staged) store_->MarkStaged(rec.id, packable);
      if (st.ok() && committed_) committed_(s.chunk);
      if (!st.ok()) {
        // Uploaded but not committed; the data is reported lost to the application instead
        // of silently dropped. When the engine says the commit cannot have happened (the
        // inode is gone: another client removed the file; or a quota is full), the blocks
        // are deleted now. After any other error (a lost connection) the commit may have
        // landed, so they stay, and gc collects them if it did not.
        if (st.code() == ENOENT || st.code() == ESTALE || st.code() == EDQUOT) s.writer->Abort();
        st = st.With("committing written data of inode " + std::to_string(ino_));
      }
    } else {
      st = st.With("uploading written data of inode " + std::to_string(ino_));
    }
    if (!st.ok()) first = st;
  }
  for (; i < slices_.size(); ++i) slices_[i].writer->Abort();
  bool had_slices = !slices_.empty();
  slices_.clear();
  pending_length_ = 0;
  pending_bytes_ = 0;
  dirty_since_ns_ = 0;
  error_ = Status::OK();
  if (hook_ && had_slices) hook_(committed ? &attr : nullptr);
  dirty_ = false;
  return first;
}

}  // namespace tierfs
