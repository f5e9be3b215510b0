#include "vfs/file_reader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "chunk/cached_store.h"
#include "chunk/read_pieces.h"
#include "meta/slice_map.h"
#include "meta/types.h"
#include "vfs/inode_state.h"

namespace tierfs {

namespace {
constexpr uint64_t kMaxReadahead = 64ull << 20;
// How far out of order the READs of one sequential stream may arrive (see Readahead).
constexpr uint64_t kStreamSlack = 2ull << 20;
}  // namespace

FileReader::FileReader(std::shared_ptr<InodeState> state, CachedStore* store)
    : st_(std::move(state)), store_(store) {}

Status FileReader::Read(uint64_t off, size_t len, char* buf, ReadPieces* pieces) {
  FailedChunk failed;
  Status st = ReadRange(off, len, buf, pieces, &failed);
  if (!st.ok() && failed.valid) {
    // The map may be out of date: its slices replaced (compaction, on any client) and their
    // blocks gone after the release grace. Read again if the map changed.
    {
      std::lock_guard<std::mutex> l(st_->mu);
      st_->RefreshLocked(nullptr, 0, InodeState::Cause::kChange);
    }
    auto now = st_->Segments(failed.chunk);
    if (now.ok() && *now != failed.segs) {
      if (pieces) pieces->Clear();
      st = ReadRange(off, len, buf, pieces, nullptr);
    }
  }
  RETURN_IF_ERROR(st);
  Readahead(off, len);
  return Status::OK();
}

Status FileReader::ReadRange(uint64_t off, size_t len, char* buf, ReadPieces* pieces, FailedChunk* failed) {
  uint64_t pos = off, end = off + len;
  while (pos < end) {
    uint32_t chunk = static_cast<uint32_t>(pos >> kChunkBits);
    uint64_t chunk_start = static_cast<uint64_t>(chunk) * kChunkSize;
    uint64_t piece_end = std::min(end, chunk_start + kChunkSize);
    uint32_t cpos = static_cast<uint32_t>(pos - chunk_start);
    uint32_t clen = static_cast<uint32_t>(piece_end - pos);
    ASSIGN_OR_RETURN(auto segs, st_->Segments(chunk));
    char* out = buf + (pos - off);
    // Only holes and gaps are zeroed: the pieces are sorted and do not overlap, and a
    // memset of every read's buffer cost 3% of a cold sequential read's CPU.
    uint32_t zeroed_to = cpos;
    auto zero_to = [&](uint32_t p) {
      if (p > zeroed_to) {
        memset(out + (zeroed_to - cpos), 0, p - zeroed_to);
        if (pieces) pieces->AddScratch(out + (zeroed_to - cpos), p - zeroed_to);
      }
      zeroed_to = std::max(zeroed_to, p);
    };
    for (const auto& s : Slice(segs, cpos, clen)) {
      zero_to(s.pos);
      if (s.id == 0) {
        zero_to(s.pos + s.len);
        continue;
      }
      zeroed_to = std::max(zeroed_to, s.pos + s.len);
      Status rs = store_->ReadSlice(s.id, s.size, s.off, s.len, out + (s.pos - cpos), pieces,
                                    PackRef{s.pack, s.pack_len, s.pack_off});
      if (!rs.ok()) {
        if (failed) *failed = FailedChunk{true, chunk, segs};
        spdlog::error("read of inode {} at offset {} failed: {}", st_->ino, chunk_start + s.pos, rs.ToString());
        return Status::Err(EIO, "reading inode " + std::to_string(st_->ino) + ": " + rs.message());
      }
    }
    zero_to(cpos + clen);
    pos = piece_end;
  }
  return Status::OK();
}

void FileReader::Readahead(uint64_t off, uint64_t len) {
  uint64_t end = off + len;
  uint32_t block = store_->config().block_size;
  uint64_t length;
  {
    std::lock_guard<std::mutex> l(st_->mu);
    length = st_->length;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    // The kernel's readahead sends several READs of one stream at once, and FUSE workers
    // serve them in any order: a read within kStreamSlack of the stream's furthest end
    // continues the stream (measured: with an exact match, 670 of 8192 reads of a 1 GiB
    // sequential read reset the window). Only a read that moves the stream forward grows
    // the window; one far away is a seek and starts over.
    bool near = off + len + kStreamSlack >= last_end_ && off <= last_end_ + kStreamSlack;
    if (last_end_ != 0 && near) {
      if (end > last_end_) window_ = window_ ? std::min(window_ * 2, kMaxReadahead) : 2ull * block;
    } else if (off != 0 || last_end_ != 0) {
      window_ = 0;
      prefetched_to_ = 0;
    }
    last_end_ = near ? std::max(last_end_, end) : end;
    if (window_ == 0) return;
    end = last_end_;
    uint64_t target = std::min<uint64_t>(end + window_, length);
    uint64_t from = std::max(end, prefetched_to_);
    if (from >= target) return;
    // Prefetch in whole-block steps to avoid a stream of tiny requests.
    if (target - from < block && target < length) return;
    prefetched_to_ = target;
    end = from;
    len = target - from;
  }
  uint64_t pos = end, stop = end + len;
  while (pos < stop) {
    uint32_t chunk = static_cast<uint32_t>(pos >> kChunkBits);
    uint64_t chunk_start = static_cast<uint64_t>(chunk) * kChunkSize;
    uint64_t piece_end = std::min(stop, chunk_start + kChunkSize);
    auto segs = st_->Segments(chunk);
    if (!segs.ok()) return;
    uint32_t cpos = static_cast<uint32_t>(pos - chunk_start);
    for (const auto& s : Slice(*segs, cpos, static_cast<uint32_t>(piece_end - pos))) {
      if (s.id) store_->Prefetch(s.id, s.size, s.off, s.len, PackRef{s.pack, s.pack_len, s.pack_off});
    }
    pos = piece_end;
  }
}

}  // namespace tierfs
