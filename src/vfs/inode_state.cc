#include "vfs/inode_state.h"

#include <algorithm>

#include "meta/meta.h"
#include "vfs/file_writer.h"

namespace tierfs {

namespace {
// Refresh reads the attributes at most this many times while commits race with it.
constexpr int kRefreshReads = 9;
}  // namespace

void InodeState::Invalidate() {
  chunks_.clear();
  chunk_list_.reset();
  ++gen_;
}

uint64_t InodeState::Gen() {
  std::lock_guard<std::mutex> l(mu);
  return gen_;
}

void InodeState::KeepSegmentsLocked(uint32_t chunk, std::vector<ChunkSegment> segs, uint64_t read_gen) {
  if (gen_ == read_gen) chunks_[chunk] = std::move(segs);
}

Result<std::vector<ChunkSegment>> InodeState::Segments(uint32_t chunk) {
  uint64_t read_gen;
  {
    std::lock_guard<std::mutex> l(mu);
    auto it = chunks_.find(chunk);
    if (it != chunks_.end()) return it->second;
    read_gen = gen_;
  }
  ASSIGN_OR_RETURN(auto recs, meta_->ReadChunk(ino, chunk));
  std::vector<ChunkSegment> segs = BuildSliceMap(std::move(recs));
  std::lock_guard<std::mutex> l(mu);
  // Read before a commit of this client's ended: good for this read, which overlapped the
  // commit, but not for the cache.
  KeepSegmentsLocked(chunk, segs, read_gen);
  return segs;
}

Result<std::vector<uint32_t>> InodeState::ChunkList() {
  uint64_t read_gen;
  {
    std::lock_guard<std::mutex> l(mu);
    if (chunk_list_) return *chunk_list_;
    read_gen = gen_;
  }
  ASSIGN_OR_RETURN(auto list, meta_->ListChunks(ino));
  std::lock_guard<std::mutex> l(mu);
  if (gen_ == read_gen) chunk_list_ = list;
  return list;
}

bool InodeState::RefreshLocked(const Attr* a, uint64_t read_gen, Cause cause) {
  // Whether `a` shows data changes this client has not seen (another client's).
  const bool unseen = a && a->seq > seen_seq_;
  // Whether `a` may replace the cached length: nothing of this client's changed the file
  // while it was read. A commit's attributes are current by construction; a change's
  // were re-read by Refresh until they were (see Refresh for its last try).
  const bool fresh = cause != Cause::kOpen || gen_ == read_gen;
  // Writes buffered here: their length is ahead of any the engine knows. The committing
  // writer still counts as dirty while its hook runs, but its attributes are its own.
  const bool buffered = cause != Cause::kCommit && writer && writer->Dirty();

  // 1. The cached maps go, except at an open that shows nothing new.
  if (cause != Cause::kOpen || unseen) Invalidate();
  if (!a) return false;
  TakeTimesLocked(*a);
  // 2. The length.
  if (fresh && !buffered) length = a->length;
  // 3. The changes seen. A change refreshed while writes are buffered leaves them unseen.
  if (cause != Cause::kChange || !buffered) seen_seq_ = std::max(seen_seq_, a->seq);
  return unseen;
}

Result<bool> InodeState::Refresh(const Attr* known, uint64_t read_gen) {
  for (int attempt = 0;; ++attempt) {
    Attr a;
    if (known && attempt == 0) {
      a = *known;
    } else {
      read_gen = Gen();
      ASSIGN_OR_RETURN(a, meta_->GetAttr(ino));
    }
    std::lock_guard<std::mutex> l(mu);
    // A commit of this client's raced with the read: read again (the commit's own
    // attributes may predate the change being refreshed for). The last read is taken
    // even if one raced with it too.
    if (gen_ != read_gen && attempt + 1 < kRefreshReads) {
      Invalidate();
      continue;
    }
    return RefreshLocked(&a, read_gen, Cause::kChange);
  }
}

Result<std::vector<std::pair<uint32_t, std::vector<ChunkSegment>>>> ReadSliceMaps(Meta* meta, Ino ino) {
  std::vector<std::pair<uint32_t, std::vector<ChunkSegment>>> out;
  ASSIGN_OR_RETURN(auto indexes, meta->ListChunks(ino));
  for (uint32_t idx : indexes) {
    ASSIGN_OR_RETURN(auto recs, meta->ReadChunk(ino, idx));
    out.emplace_back(idx, BuildSliceMap(std::move(recs)));
  }
  return out;
}

}  // namespace tierfs
