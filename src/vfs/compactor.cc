#include "vfs/compactor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "chunk/cached_store.h"
#include "chunk/slice_writer.h"
#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_retry_timeout.h"
#include "meta/slice_map.h"

namespace tierfs {

namespace {
constexpr uint32_t kCopyPiece = 4u << 20;  // bytes read and written at a time
constexpr std::chrono::seconds kWriterCompactionBudget(2);
}  // namespace

CompactStats& CompactStats::operator+=(const CompactStats& o) {
  chunks += o.chunks;
  compacted += o.compacted;
  conflicts += o.conflicts;
  records_before += o.records_before;
  records_after += o.records_after;
  live_bytes += o.live_bytes;
  dead_bytes += o.dead_bytes;
  return *this;
}

Compactor::Compactor(Meta* meta, CachedStore* store, std::function<void(Ino)> swapped, CompactorOptions opts)
    : meta_(meta), store_(store), swapped_(std::move(swapped)), opts_(opts) {
  thread_ = std::thread([this] { Loop(); });
}

Compactor::~Compactor() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Compactor::NoteCommit(Ino ino, uint32_t index) {
  bool now = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    uint32_t& n = commits_[{ino, index}];
    ++n;
    if (n >= opts_.max_records) {
      n = 0;
      now = true;
    } else if (n % opts_.check_after == 0 && queued_.insert({ino, index}).second) {
      queue_.push_back({ino, index});
      cv_.notify_one();
    }
  }
  if (now) {
    // The background has not kept up: this writer waits for its chunk, which bounds what
    // a read of the chunk scans; for 2 s of metadata retries at most, after which the
    // background carries on (meta_retry_timeout.h says what waiting longer did).
    TxnBudgetScope budget(kWriterCompactionBudget);
    auto st = CompactChunk(ino, index, /*force=*/false);
    if (!st.ok()) spdlog::warn("compaction of inode {} chunk {}: {}", ino, index, st.status().ToString());
  }
}

void Compactor::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto job = queue_.front();
    queue_.pop_front();
    queued_.erase(job);
    l.unlock();
    auto st = CompactChunk(job.first, job.second, /*force=*/false);
    if (!st.ok() && st.status().code() != ENOENT) {
      spdlog::warn("compaction of inode {} chunk {}: {}", job.first, job.second, st.status().ToString());
    }
    l.lock();
  }
}

Result<CompactStats> Compactor::CompactFile(Ino ino, bool force) {
  ASSIGN_OR_RETURN(auto chunks, meta_->ListChunks(ino));
  CompactStats total;
  for (uint32_t index : chunks) {
    ASSIGN_OR_RETURN(CompactStats s, CompactChunk(ino, index, force));
    total += s;
  }
  return total;
}

Result<CompactStats> Compactor::CompactChunk(Ino ino, uint32_t index, bool force) {
  CompactStats stats;
  stats.chunks = 1;
  ASSIGN_OR_RETURN(Meta::ChunkRecords cr, meta_->ReadChunkRecords(ino, index));
  // A truncation not yet applied would not cut the new records: wait for the cleaner.
  if (cr.masked || cr.records.size() < 2) return stats;
  std::vector<ChunkSegment> segs = BuildSliceMap(cr.records);
  uint64_t referenced = 0, live = 0;
  for (const auto& r : cr.records) {
    if (r.id != 0) referenced += r.len;
  }
  // What replaces the records: one new slice per run of contiguous data, and the
  // unwritten (fallocated) ranges as zero records; holes need no record.
  struct Run {
    uint32_t pos = 0, len = 0;
    std::vector<ChunkSegment> parts;
  };
  std::vector<Run> runs;
  std::vector<SliceRecord> zeros;
  for (const auto& s : segs) {
    if (s.id == 0) {
      if (s.size == kUnwrittenSize) zeros.push_back(SliceRecord{0, s.pos, 0, kUnwrittenSize, 0, s.len});
      continue;
    }
    live += s.len;
    if (runs.empty() || runs.back().pos + runs.back().len != s.pos) runs.push_back(Run{s.pos, 0, {}});
    runs.back().len += s.len;
    runs.back().parts.push_back(s);
  }
  const uint64_t dead = referenced > live ? referenced - live : 0;
  const size_t after = runs.size() + zeros.size();
  bool worth = force ? (after < cr.records.size() || dead > 0)
                     : (cr.records.size() >= opts_.min_records || (dead > live && after < cr.records.size()) ||
                        (dead > live && dead >= (4u << 20)));
  if (!worth || after > cr.records.size()) return stats;

  // Copy each run into a new slice.
  std::vector<SliceRecord> fresh = zeros;
  std::vector<std::unique_ptr<SliceWriter>> writers;
  auto abort_all = [&] {
    for (auto& w : writers) w->Abort();
  };
  std::string buf;
  for (const Run& run : runs) {
    ASSIGN_OR_RETURN(uint64_t id, meta_->NewSliceId());
    writers.push_back(store_->NewSliceWriter(id));
    SliceWriter* w = writers.back().get();
    uint32_t at = 0;
    for (const ChunkSegment& part : run.parts) {
      for (uint32_t done = 0; done < part.len;) {
        uint32_t n = std::min(kCopyPiece, part.len - done);
        buf.resize(n);
        Status st = store_->ReadSlice(part.id, part.size, part.off + done, n, buf.data(), nullptr,
                                      PackRef{part.pack, part.pack_len, part.pack_off});
        if (!st.ok()) {
          abort_all();
          return st.With("compacting inode " + std::to_string(ino) + " chunk " + std::to_string(index));
        }
        if (!w->Write(at, buf)) {
          abort_all();
          return Status::Err(EIO, "internal error: a compaction slice refused a write");
        }
        at += n;
        done += n;
      }
    }
    Status st = w->Finish();
    if (!st.ok()) {
      abort_all();
      return st.With("compacting inode " + std::to_string(ino) + " chunk " + std::to_string(index));
    }
    fresh.push_back(SliceRecord{0, run.pos, id, run.len, 0, run.len});
  }
  std::vector<uint64_t> staged;
  for (const auto& r : fresh) {
    if (r.id != 0 && store_->SliceStaged(r.id)) staged.push_back(r.id);
  }
  Status st = meta_->SwapChunkRecords(ino, index, cr.records, fresh, NowNanos() + opts_.release_grace_ns, staged);
  if (!st.ok()) {
    // The swap did not happen (the chunk changed, or the file is gone): the copies go.
    // After any other error it may have, so they stay (gc collects them if it did not).
    if (st.code() == EAGAIN || st.code() == ENOENT) abort_all();
    if (st.code() == EAGAIN) {
      stats.conflicts = 1;
      return stats;
    }
    return st;
  }
  for (uint64_t id : staged) store_->MarkStaged(id);
  stats.compacted = 1;
  stats.records_before = cr.records.size();
  stats.records_after = fresh.size();
  stats.live_bytes = live;
  stats.dead_bytes = dead;
  if (swapped_) swapped_(ino);
  spdlog::debug("compacted inode {} chunk {}: {} records -> {}, {} live bytes, {} dead freed", ino, index,
                stats.records_before, stats.records_after, live, dead);
  return stats;
}

}  // namespace tierfs
