// File data layout: id allocation, chunk records, truncation masks, fallocate,
// copy_file_range, slice reference counts and the deletion of file data.
#include <fcntl.h>
#include <linux/falloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"
#include "meta/slice_map.h"

namespace tierfs {

using namespace internal;  // NOLINT

namespace {
constexpr uint64_t kInodeBatch = 256;
constexpr uint64_t kSliceBatch = 1024;

}  // namespace

namespace internal {
Status DamagedChunkRecord(std::string_view key) {
  return Status::Err(EIO, "damaged metadata: " + keys::Describe(key) +
                              " cannot be decoded; the file cannot be read there (`tierfs fsck` lists such files)");
}

Status ReadChunkTx(KvTxn& t, Ino ino, uint32_t index, std::vector<SliceRecord>* out) {
  out->clear();
  RETURN_IF_ERROR(t.Prefetch({}, {keys::ChunkPrefix(ino, index), keys::TruncRulesPrefix(ino)}));
  Status damaged;
  RETURN_IF_ERROR(ScanPrefix(t, keys::ChunkPrefix(ino, index), 0, [&](std::string_view k, std::string_view v) {
    SliceRecord r;
    uint32_t idx;
    if (!keys::ParseChunkRecordKey(k, &idx, &r.seq) || !DecodeSliceRecord(v, &r)) {
      // Damaged: reading around it would return wrong bytes without an error.
      damaged = DamagedChunkRecord(k);
      return false;
    }
    out->push_back(r);
    return true;
  }));
  RETURN_IF_ERROR(damaged);
  std::string rules = keys::TruncRulesPrefix(ino);
  uint64_t chunk_start = static_cast<uint64_t>(index) * kChunkSize;
  RETURN_IF_ERROR(ScanPrefix(t, rules, 0, [&](std::string_view k, std::string_view v) {
    uint64_t seq = keys::DecodeU64(k.substr(rules.size()));
    uint64_t length = keys::DecodeU64(v);
    if (length >= chunk_start + kChunkSize) return true;
    SliceRecord hole;
    hole.seq = seq;
    hole.pos = length > chunk_start ? static_cast<uint32_t>(length - chunk_start) : 0;
    hole.len = static_cast<uint32_t>(kChunkSize - hole.pos);
    out->push_back(hole);
    return true;
  }));
  std::sort(out->begin(), out->end(), [](const SliceRecord& a, const SliceRecord& b) { return a.seq < b.seq; });
  return ResolvePacksTx(t, out);
}

void AddAllocated(Attr* a, uint64_t bytes) {
  a->allocated = std::min<uint64_t>(a->allocated + bytes, static_cast<uint64_t>(ChargedBytes(a->length)));
}

uint64_t BlockSpan(uint64_t off, uint64_t len) {
  if (len == 0) return 0;
  return (off + len + kAllocUnit - 1) / kAllocUnit * kAllocUnit - off / kAllocUnit * kAllocUnit;
}

// Calls fn(chunk start, begin, end, segments) for every chunk overlapping [begin, end),
// with the part of the range in it; segments is empty for chunks without records (read
// only the chunks that have some).
static Status ForEachChunkMap(
    KvTxn& t, Ino ino, uint64_t begin, uint64_t end,
    const std::function<Status(uint64_t, uint64_t, uint64_t, const std::vector<ChunkSegment>&)>& fn) {
  if (begin >= end) return Status::OK();
  uint32_t first = static_cast<uint32_t>(begin >> kChunkBits);
  uint32_t last = static_cast<uint32_t>((end - 1) >> kChunkBits);
  std::vector<uint32_t> with_records;
  RETURN_IF_ERROR(t.Scan(keys::ChunkRecord(ino, first, 0), keys::ChunkRecord(ino, last + 1, 0), 0,
                         [&](std::string_view k, std::string_view) {
                           uint32_t idx;
                           uint64_t seq;
                           if (keys::ParseChunkRecordKey(k, &idx, &seq) &&
                               (with_records.empty() || with_records.back() != idx)) {
                             with_records.push_back(idx);
                           }
                           return true;
                         }));
  size_t next = 0;
  for (uint64_t idx = first; idx <= last; ++idx) {
    uint64_t cstart = idx * kChunkSize;
    uint64_t a = std::max(begin, cstart), b = std::min(end, cstart + kChunkSize);
    std::vector<ChunkSegment> segs;
    if (next < with_records.size() && with_records[next] == idx) {
      ++next;
      std::vector<SliceRecord> recs;
      RETURN_IF_ERROR(ReadChunkTx(t, ino, static_cast<uint32_t>(idx), &recs));
      segs = BuildSliceMap(std::move(recs));
    }
    RETURN_IF_ERROR(fn(cstart, a, b, segs));
  }
  return Status::OK();
}

Result<uint64_t> AllocatedBlocksTx(KvTxn& t, Ino ino, uint64_t begin, uint64_t end) {
  uint64_t blocks = 0;
  RETURN_IF_ERROR(ForEachChunkMap(t, ino, begin, end, [&](uint64_t cstart, uint64_t a, uint64_t b, const auto& segs) {
    blocks += AllocatedBlocks(segs, a - cstart, b - cstart, kAllocUnit);
    return Status::OK();
  }));
  return blocks * kAllocUnit;
}

Result<uint64_t> PunchedBlocksTx(KvTxn& t, Ino ino, uint64_t begin, uint64_t end) {
  uint64_t blocks = 0;
  RETURN_IF_ERROR(ForEachChunkMap(t, ino, begin, end, [&](uint64_t cstart, uint64_t a, uint64_t b, const auto& segs) {
    blocks += BlocksFreedByPunch(segs, a - cstart, b - cstart, kAllocUnit);
    return Status::OK();
  }));
  return blocks * kAllocUnit;
}

Status UnallocatedTx(KvTxn& t, Ino ino, uint64_t begin, uint64_t end, std::vector<std::pair<uint64_t, uint64_t>>* out) {
  return ForEachChunkMap(t, ino, begin, end, [&](uint64_t cstart, uint64_t a, uint64_t b, const auto& segs) {
    for (auto [from, to] : Unallocated(segs, static_cast<uint32_t>(a - cstart), static_cast<uint32_t>(b - cstart))) {
      out->emplace_back(cstart + from, cstart + to);
    }
    return Status::OK();
  });
}
}  // namespace internal

Result<uint64_t> Meta::NextId(const char* counter, uint64_t batch, uint64_t* next, uint64_t* end) {
  std::lock_guard<std::mutex> l(id_mu_);
  if (*next >= *end) {
    uint64_t start = 0;
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
      auto v = t.Get(keys::Counter(counter));
      if (!v.ok()) return v.status();
      start = v->has_value() ? keys::DecodeU64(**v) : 1;
      return t.Put(keys::Counter(counter), keys::EncodeU64(start + batch));
    }));
    *next = start;
    *end = start + batch;
  }
  return (*next)++;
}

Result<Ino> Meta::NextInode() { return NextId("nextInode", kInodeBatch, &next_ino_, &end_ino_); }
Result<uint64_t> Meta::NewSliceId() { return NextId("nextSlice", kSliceBatch, &next_slice_, &end_slice_); }

Result<std::vector<SliceRecord>> Meta::ReadChunk(Ino ino, uint32_t index) {
  std::vector<SliceRecord> out;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) { return ReadChunkTx(t, ino, index, &out); }, true));
  return out;
}

Result<std::vector<uint32_t>> Meta::ListChunks(Ino ino) {
  std::vector<uint32_t> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        return ScanPrefix(t, keys::ChunksPrefix(ino), 0, [&](std::string_view k, std::string_view) {
          uint32_t idx;
          uint64_t seq;
          if (keys::ParseChunkRecordKey(k, &idx, &seq) && (out.empty() || out.back() != idx)) out.push_back(idx);
          return true;
        });
      },
      true));
  return out;
}

Status Meta::WriteSlice(Ino ino, uint32_t index, const SliceRecord& rec, uint64_t min_length, int64_t mtime_ns,
                        Attr* out, bool staged) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  if (rec.pos + static_cast<uint64_t>(rec.len) > kChunkSize) return Status::Err(EINVAL, "slice crosses a chunk");
  int64_t usage = 0;
  RETURN_IF_ERROR(ChargedTxn(&usage, nullptr, [&](KvTxn& t) {
    Attr a;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    if (!a.IsRegular()) return Status::Err(EINVAL, "not a regular file");
    a.seq++;
    RETURN_IF_ERROR(t.Put(keys::ChunkRecord(ino, index, a.seq), EncodeSliceRecord(rec)));
    usage = 0;
    if (min_length > a.length) {
      usage = ChargedBytes(min_length) - ChargedBytes(a.length);
      a.length = min_length;
      RETURN_IF_ERROR(ChargeFileQuotasTx(t, ino, a, usage));
    }
    AddAllocated(&a, BlockSpan(rec.pos, rec.len));  // chunks start on block boundaries
    a.mtime_ns = a.ctime_ns = mtime_ns;
    if (out) *out = a;
    if (staged) RETURN_IF_ERROR(t.Put(keys::Staged(rec.id), keys::EncodeU64(sid_)));
    return PutAttrTx(t, ino, a);
  }));
  return Status::OK();
}

Status Meta::ClearStaged(const std::vector<uint64_t>& ids) {
  if (ids.empty()) return Status::OK();
  return engine_->Txn([&](KvTxn& t) {
    for (uint64_t id : ids) RETURN_IF_ERROR(t.Delete(keys::Staged(id)));
    return Status::OK();
  });
}


Status Meta::Fallocate(const Ctx& ctx, Ino ino, int mode, uint64_t off, uint64_t len) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  const int supported = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
  if (mode & ~supported) return Status::Err(EOPNOTSUPP, "unsupported fallocate mode");
  if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) {
    return Status::Err(EOPNOTSUPP, "punch hole needs FALLOC_FL_KEEP_SIZE");
  }
  if (len == 0) return Status::Err(EINVAL, "zero length");
  if (!(mode & FALLOC_FL_PUNCH_HOLE)) {
    // Allocating more than the volume has left fails as on a local file system, before
    // the file size limit is looked at (the kernel allows FUSE files up to 8 EiB).
    ASSIGN_OR_RETURN(StatFs fs, GetStatFs());
    uint64_t free = fs.capacity_bytes > fs.used_bytes ? fs.capacity_bytes - fs.used_bytes : 0;
    if (len > free) return Status::Err(ENOSPC, "fallocate of " + std::to_string(len) + " bytes: the volume has " +
                                                  std::to_string(free) + " left");
  }
  if (off + len > kMaxFileSize) return Status::Err(EFBIG, "beyond the file size limit");
  (void)ctx;
  int64_t usage = 0;
  RETURN_IF_ERROR(ChargedTxn(&usage, nullptr, [&](KvTxn& t) {
    usage = 0;
    Attr a;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    if (a.IsDir()) return Status::Err(EISDIR, "is a directory");
    if (!a.IsRegular()) return Status::Err(ENODEV, "not a regular file");
    int64_t now = NowNanos();
    // Writes one zero record over [from, to): a hole, or an allocated range that reads as
    // zeros (as ext4's unwritten extents: counted in st_blocks, a hole for SEEK_DATA).
    auto put_zeros = [&](uint64_t from, uint64_t to, bool allocated) -> Status {
      for (uint64_t pos = from; pos < to;) {
        uint32_t index = static_cast<uint32_t>(pos >> kChunkBits);
        uint64_t chunk_end = std::min(to, (static_cast<uint64_t>(index) + 1) * kChunkSize);
        SliceRecord zeros;
        zeros.pos = static_cast<uint32_t>(pos - static_cast<uint64_t>(index) * kChunkSize);
        zeros.len = static_cast<uint32_t>(chunk_end - pos);
        zeros.size = allocated ? kUnwrittenSize : 0;
        a.seq++;
        RETURN_IF_ERROR(t.Put(keys::ChunkRecord(ino, index, a.seq), EncodeSliceRecord(zeros)));
        pos = chunk_end;
      }
      return Status::OK();
    };
    uint64_t end = off + len;
    // Allocation counts in 4 KiB blocks (st_blocks, SEEK_DATA/SEEK_HOLE), exactly here:
    // fallocate is rare, and only the chunks of the range that have records are read.
    // The part of the range inside the file (as it will be), whose blocks count:
    const uint64_t new_len = (mode & FALLOC_FL_KEEP_SIZE) ? a.length : std::max(a.length, end);
    const uint64_t lo = std::min(off, new_len), hi = std::min(end, new_len);
    uint64_t had = 0;  // bytes of the blocks [lo, hi) touches that were allocated before
    if (!(mode & FALLOC_FL_PUNCH_HOLE) && hi > lo) {
      ASSIGN_OR_RETURN(had, AllocatedBlocksTx(t, ino, lo / kAllocUnit * kAllocUnit, BlockSpan(0, hi)));
    }
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
      if (mode & FALLOC_FL_KEEP_SIZE) end = std::min(end, a.length);
      if (mode & FALLOC_FL_PUNCH_HOLE) {
        // Blocks left without an allocated byte stop counting; an edge block with data
        // outside the hole stays (ext4 zeroes that part and keeps the block).
        ASSIGN_OR_RETURN(uint64_t freed, PunchedBlocksTx(t, ino, lo, hi));
        a.allocated -= std::min(a.allocated, freed);
      }
      RETURN_IF_ERROR(put_zeros(off, end, (mode & FALLOC_FL_ZERO_RANGE) != 0));
      a.mtime_ns = now;
    }
    if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > a.length) {
      usage = ChargedBytes(off + len) - ChargedBytes(a.length);
      RETURN_IF_ERROR(ChargeFileQuotasTx(t, ino, a, usage));
      a.length = off + len;
      a.mtime_ns = now;
    }
    if (!(mode & FALLOC_FL_PUNCH_HOLE)) {
      // Zeroed or preallocated: every block the range touches inside the file is allocated
      // now; those that were not before start counting.
      const uint64_t span = BlockSpan(lo, hi - lo);
      AddAllocated(&a, span - std::min(span, had));
      if (!(mode & FALLOC_FL_ZERO_RANGE)) {
        // Preallocation marks what is not yet allocated, leaving data as is.
        std::vector<std::pair<uint64_t, uint64_t>> gaps;
        RETURN_IF_ERROR(UnallocatedTx(t, ino, lo, hi, &gaps));
        for (auto [from, to] : gaps) RETURN_IF_ERROR(put_zeros(from, to, true));
      }
    }
    a.ctime_ns = now;
    return PutAttrTx(t, ino, a);
  }));
  return Status::OK();
}

Result<uint64_t> Meta::CopyFileRange(const Ctx& ctx, Ino in, uint64_t off_in, Ino out, uint64_t off_out,
                                     uint64_t len) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  (void)ctx;
  uint64_t copied = 0;
  int64_t usage = 0;
  RETURN_IF_ERROR(ChargedTxn(&usage, nullptr, [&](KvTxn& t) {
    copied = 0;
    usage = 0;
    Attr ia, oa;
    RETURN_IF_ERROR(GetAttrTx(t, in, &ia));
    if (!ia.IsRegular()) return Status::Err(EINVAL, "source is not a regular file");
    if (in == out) {
      oa = ia;
    } else {
      RETURN_IF_ERROR(GetAttrTx(t, out, &oa));
    }
    if (!oa.IsRegular()) return Status::Err(EINVAL, "destination is not a regular file");
    if (off_in >= ia.length) return Status::OK();
    uint64_t n = std::min(len, ia.length - off_in);
    if (in == out && off_in < off_out + n && off_out < off_in + n) {
      return Status::Err(EINVAL, "overlapping ranges in one file");
    }
    if (off_out + n > kMaxFileSize) return Status::Err(EFBIG, "beyond the file size limit");
    int64_t delta = static_cast<int64_t>(off_out) - static_cast<int64_t>(off_in);
    // Place one piece [src_start, src_end) of a source record, split at destination chunk
    // boundaries, keeping the records' order so shadowing is preserved.
    auto place = [&](const SliceRecord& r, uint64_t src_start, uint64_t src_end, uint64_t rec_abs) -> Status {
      for (uint64_t s = src_start; s < src_end;) {
        uint64_t d = static_cast<uint64_t>(static_cast<int64_t>(s) + delta);
        uint32_t didx = static_cast<uint32_t>(d >> kChunkBits);
        uint64_t dchunk_end = (static_cast<uint64_t>(didx) + 1) * kChunkSize;
        uint64_t piece = std::min(src_end - s, dchunk_end - d);
        SliceRecord nr;
        nr.pos = static_cast<uint32_t>(d - static_cast<uint64_t>(didx) * kChunkSize);
        nr.len = static_cast<uint32_t>(piece);
        if (r.id) {
          nr.id = r.id;
          nr.size = r.size;
          nr.flags = r.flags;
          nr.off = static_cast<uint32_t>(r.off + (s - rec_abs));
          auto ref = t.Get(keys::SliceRef(r.id, r.size));
          if (!ref.ok()) return ref.status();
          uint64_t extra = ref->has_value() ? keys::DecodeU64(**ref) : 0;
          RETURN_IF_ERROR(t.Put(keys::SliceRef(r.id, r.size), keys::EncodeU64(extra + 1)));
        }
        oa.seq++;
        RETURN_IF_ERROR(t.Put(keys::ChunkRecord(out, didx, oa.seq), EncodeSliceRecord(nr)));
        s += piece;
      }
      return Status::OK();
    };
    uint64_t data = 0;  // 4 KiB blocks of the destination that data was copied into (bytes)
    // First a hole over the whole destination range, so source holes copy as holes.
    SliceRecord hole;
    RETURN_IF_ERROR(place(hole, off_in, off_in + n, off_in));
    for (uint64_t pos = off_in; pos < off_in + n;) {
      uint32_t index = static_cast<uint32_t>(pos >> kChunkBits);
      uint64_t chunk_abs = static_cast<uint64_t>(index) * kChunkSize;
      uint64_t end = std::min(off_in + n, chunk_abs + kChunkSize);
      std::vector<SliceRecord> recs;
      RETURN_IF_ERROR(ReadChunkTx(t, in, index, &recs));
      // Only what is visible in the source range is copied, not the records it shadows:
      // copying every record made each copy of a fragmented range as large as its whole
      // history, and copies of copies grew without bound.
      auto visible = Slice(BuildSliceMap(std::move(recs)), static_cast<uint32_t>(pos - chunk_abs),
                           static_cast<uint32_t>(end - pos));
      for (const ChunkSegment& seg : visible) {
        if (seg.id == 0) continue;  // already a hole
        data += BlockSpan(off_out + (chunk_abs + seg.pos - off_in), seg.len);
        SliceRecord r;
        r.id = seg.id;
        r.size = seg.size;
        r.off = seg.off;
        r.pos = seg.pos;
        r.len = seg.len;
        r.flags = seg.flags;
        uint64_t rs = chunk_abs + seg.pos;
        RETURN_IF_ERROR(place(r, rs, rs + seg.len, rs));
      }
      pos = end;
    }
    int64_t now = NowNanos();
    if (off_out + n > oa.length) {
      usage = ChargedBytes(off_out + n) - ChargedBytes(oa.length);
      RETURN_IF_ERROR(ChargeFileQuotasTx(t, out, oa, usage));
      oa.length = off_out + n;
    }
    AddAllocated(&oa, data);
    oa.mtime_ns = oa.ctime_ns = now;
    copied = n;
    return PutAttrTx(t, out, oa);
  }));
  return copied;
}

Status Meta::UnrefSlice(KvTxn& t, uint64_t id, uint32_t size) {
  if (id == 0) return Status::OK();
  auto ref = t.Get(keys::SliceRef(id, size));
  if (!ref.ok()) return ref.status();
  uint64_t extra = ref->has_value() ? keys::DecodeU64(**ref) : 0;
  if (extra > 1) return t.Put(keys::SliceRef(id, size), keys::EncodeU64(extra - 1));
  if (extra == 1) return t.Delete(keys::SliceRef(id, size));
  // A slice deleted before its staged blocks were uploaded: the writer discards them.
  RETURN_IF_ERROR(t.Delete(keys::Staged(id)));
  bool packed = false;
  RETURN_IF_ERROR(ReleasePackedTx(t, id, &packed));
  if (packed) return Status::OK();  // no blocks of its own
  return t.Put(keys::PendingSlice(id, size), keys::EncodeU64(static_cast<uint64_t>(NowNanos())));
}

Status Meta::DeleteFilesData(const std::vector<Ino>& inos, size_t* finished) {
  constexpr size_t kBudget = 1000;  // keys visited per transaction
  return engine_->Txn([&](KvTxn& t) {
    *finished = 0;
    size_t budget = kBudget;
    for (Ino ino : inos) {
      std::vector<std::pair<std::string, SliceRecord>> recs;
      RETURN_IF_ERROR(ScanPrefix(t, keys::ChunksPrefix(ino), budget, [&](std::string_view k, std::string_view v) {
        SliceRecord r;
        if (DecodeSliceRecord(v, &r)) {
          recs.emplace_back(std::string(k), r);
        } else {
          // A damaged record of a file being deleted goes with it (its blocks, if any, are
          // left for gc to find as unreferenced).
          spdlog::warn("deleting damaged metadata of a removed file: {}", keys::Describe(k));
          r = SliceRecord();
          recs.emplace_back(std::string(k), r);
        }
        return true;
      }));
      for (auto& [k, r] : recs) {
        RETURN_IF_ERROR(UnrefSlice(t, r.id, r.size));
        RETURN_IF_ERROR(t.Delete(k));
      }
      if (recs.size() >= budget) return Status::OK();  // this file needs another round
      budget -= recs.size();
      // No records left: drop truncation masks and the pending-file record.
      std::vector<std::string> rules;
      std::string prefix = keys::TruncRulesPrefix(ino);
      RETURN_IF_ERROR(ScanPrefix(t, prefix, 0, [&](std::string_view k, std::string_view) {
        rules.emplace_back(k);
        return true;
      }));
      for (auto& k : rules) {
        RETURN_IF_ERROR(t.Delete(k));
        RETURN_IF_ERROR(
            t.Delete(keys::PendingTrunc(ino, keys::DecodeU64(std::string_view(k).substr(prefix.size())))));
      }
      RETURN_IF_ERROR(t.Delete(keys::PendingFile(ino)));
      ++*finished;
      if (budget <= 1 + rules.size()) return Status::OK();
      budget -= 1 + rules.size();
    }
    return Status::OK();
  });
}

Status Meta::ApplyTruncRule(Ino ino, uint64_t seq, bool* done) {
  constexpr size_t kBudget = 4096;
  return engine_->Txn([&](KvTxn& t) {
    *done = false;
    auto rule = t.Get(keys::TruncRule(ino, seq));
    if (!rule.ok()) return rule.status();
    if (!rule->has_value()) {
      *done = true;
      return t.Delete(keys::PendingTrunc(ino, seq));
    }
    uint64_t length = keys::DecodeU64(**rule);
    uint32_t first = static_cast<uint32_t>(length >> kChunkBits);
    std::string begin = keys::ChunkPrefix(ino, first);
    std::vector<std::pair<std::string, SliceRecord>> recs;
    size_t visited = 0;
    RETURN_IF_ERROR(t.Scan(begin, PrefixEnd(keys::ChunksPrefix(ino)), kBudget,
                           [&](std::string_view k, std::string_view v) {
                             visited++;
                             SliceRecord r;
                             uint32_t idx;
                             if (keys::ParseChunkRecordKey(k, &idx, &r.seq) && DecodeSliceRecord(v, &r) &&
                                 r.seq < seq) {
                               recs.emplace_back(std::string(k), r);
                             }
                             return true;
                           }));
    for (auto& [k, r] : recs) {
      uint32_t idx;
      uint64_t rseq;
      keys::ParseChunkRecordKey(k, &idx, &rseq);
      uint64_t start = static_cast<uint64_t>(idx) * kChunkSize + r.pos;
      if (start >= length) {
        RETURN_IF_ERROR(UnrefSlice(t, r.id, r.size));
        RETURN_IF_ERROR(t.Delete(k));
      } else if (start + r.len > length) {
        r.len = static_cast<uint32_t>(length - start);
        RETURN_IF_ERROR(t.Put(k, EncodeSliceRecord(r)));
      }
    }
    if (visited >= kBudget) return Status::OK();  // more to do in the next round
    RETURN_IF_ERROR(t.Delete(keys::TruncRule(ino, seq)));
    RETURN_IF_ERROR(t.Delete(keys::PendingTrunc(ino, seq)));
    *done = true;
    return Status::OK();
  });
}

Status Meta::ForEachSliceRef(const std::function<void(uint64_t id, uint32_t size)>& fn,
                             std::vector<DamagedRecord>* damaged) {
  constexpr size_t kBatch = 10000;
  std::string from = "A";
  const std::string end = PrefixEnd("A");
  for (;;) {
    std::vector<std::pair<uint64_t, uint32_t>> refs;
    std::vector<DamagedRecord> bad;
    std::string last;
    size_t seen = 0;
    RETURN_IF_ERROR(engine_->Txn(
        [&](KvTxn& t) {
          refs.clear();
          bad.clear();
          seen = 0;
          return t.Scan(from, end, kBatch, [&](std::string_view k, std::string_view v) {
            ++seen;
            last.assign(k);
            // "A" ino(8) "C" index(4) seq(8): a chunk record.
            if (k.size() >= 10 && k[9] == 'C') {
              SliceRecord r;
              if (k.size() != 22 || !DecodeSliceRecord(v, &r)) {
                bad.push_back(DamagedRecord{std::string(k), "a chunk record that cannot be decoded"});
              } else if (r.id) {
                refs.emplace_back(r.id, r.size);
              }
            }
            return true;
          });
        },
        true));
    for (auto [id, size] : refs) fn(id, size);
    if (damaged) damaged->insert(damaged->end(), bad.begin(), bad.end());
    if (seen < kBatch) return Status::OK();
    from = last;
    from.push_back('\0');  // the smallest key after `last`
  }
}

Result<std::vector<std::pair<uint64_t, uint32_t>>> Meta::PendingSlices() {
  std::vector<std::pair<uint64_t, uint32_t>> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        return ScanPrefix(t, std::string(keys::kPendingSlicePrefix), 0, [&](std::string_view k, std::string_view) {
          uint64_t id;
          uint32_t size;
          if (keys::ParseSliceKey(k, &id, &size)) out.emplace_back(id, size);
          return true;
        });
      },
      true));
  return out;
}

Result<std::vector<Meta::PendingSlice>> Meta::PendingSlicesDue() {
  std::vector<PendingSlice> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        return ScanPrefix(t, std::string(keys::kPendingSlicePrefix), 0, [&](std::string_view k, std::string_view v) {
          PendingSlice p;
          if (!keys::ParseSliceKey(k, &p.id, &p.size)) return true;
          p.due_ns = v.size() == 8 ? static_cast<int64_t>(keys::DecodeU64(v)) : 0;
          out.push_back(p);
          return true;
        });
      },
      true));
  return out;
}

Status Meta::ForEachInode(const std::function<void(Ino ino, const Attr& attr)>& fn,
                          std::vector<DamagedRecord>* damaged) {
  constexpr size_t kBatch = 10000;
  std::string from = "A";
  const std::string end = PrefixEnd("A");
  for (;;) {
    std::vector<std::pair<Ino, Attr>> batch;
    std::vector<DamagedRecord> bad;
    std::string last;
    size_t seen = 0;
    RETURN_IF_ERROR(engine_->Txn(
        [&](KvTxn& t) {
          batch.clear();
          bad.clear();
          seen = 0;
          return t.Scan(from, end, kBatch, [&](std::string_view k, std::string_view v) {
            ++seen;
            last.assign(k);
            Attr a;
            if (k.size() >= 10 && k[9] == 'I') {
              if (k.size() == 10 && DecodeAttr(v, &a)) {
                batch.emplace_back(keys::DecodeU64(k.substr(1, 8)), a);
              } else {
                bad.push_back(DamagedRecord{std::string(k), "attributes that cannot be decoded"});
              }
            }
            return true;
          });
        },
        true));
    for (auto& [ino, a] : batch) fn(ino, a);
    if (damaged) damaged->insert(damaged->end(), bad.begin(), bad.end());
    if (seen < kBatch) return Status::OK();
    from = last;
    from.push_back('\0');
  }
}

Status Meta::RepairLinkCount(Ino ino, uint32_t nlink) {
  return engine_->Txn([&](KvTxn& t) {
    Attr a;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    a.nlink = nlink;
    return PutAttrTx(t, ino, a);
  });
}

Status Meta::RepairRemoveEntry(Ino parent, const std::string& name) {
  return engine_->Txn([&](KvTxn& t) { return t.Delete(keys::Dentry(parent, name)); });
}

}  // namespace tierfs
