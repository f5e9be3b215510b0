// Compaction's metadata side: a consistent read of one chunk's records, and the
// compare-and-swap that replaces them (vfs/compactor.h does the data side).
#include <algorithm>
#include <map>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

Result<Meta::ChunkRecords> Meta::ReadChunkRecords(Ino ino, uint32_t index) {
  ChunkRecords out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out = ChunkRecords();
        Attr a;
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        if (!a.IsRegular()) return Status::Err(EINVAL, "inode " + std::to_string(ino) + " is not a regular file");
        out.length = a.length;
        Status damaged;
        RETURN_IF_ERROR(ScanPrefix(t, keys::ChunkPrefix(ino, index), 0, [&](std::string_view k, std::string_view v) {
          SliceRecord r;
          uint32_t idx;
          if (!keys::ParseChunkRecordKey(k, &idx, &r.seq) || !DecodeSliceRecord(v, &r)) {
            damaged = DamagedChunkRecord(k);  // compacting around it would hide it
            return false;
          }
          out.records.push_back(r);
          return true;
        }));
        RETURN_IF_ERROR(damaged);
        RETURN_IF_ERROR(ScanPrefix(t, keys::TruncRulesPrefix(ino), 1, [&](std::string_view, std::string_view) {
          out.masked = true;
          return false;
        }));
        return ResolvePacksTx(t, &out.records);
      },
      /*read_only=*/true));
  return out;
}

Status Meta::SwapChunkRecords(Ino ino, uint32_t index, const std::vector<SliceRecord>& old,
                              std::vector<SliceRecord> fresh, int64_t release_after_ns,
                              const std::vector<uint64_t>& staged) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  if (old.empty() || fresh.size() > old.size()) {
    return Status::Err(EINVAL, "a swap replaces a chunk's records with as many or fewer");
  }
  // The new records take the highest seqs of the old ones: still below every record
  // committed since the old ones were read, which therefore keep shadowing them.
  std::vector<uint64_t> seqs;
  for (const auto& r : old) seqs.push_back(r.seq);
  std::sort(seqs.begin(), seqs.end());
  const uint64_t max_old = seqs.back();
  seqs.erase(seqs.begin(), seqs.end() - static_cast<std::ptrdiff_t>(fresh.size()));
  for (size_t i = 0; i < fresh.size(); ++i) fresh[i].seq = seqs[i];
  return engine_->Txn([&](KvTxn& t) {
    Attr a;
    RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
    if (!a.IsRegular()) return Status::Err(EINVAL, "inode " + std::to_string(ino) + " is not a regular file");
    bool masked = false;
    RETURN_IF_ERROR(ScanPrefix(t, keys::TruncRulesPrefix(ino), 1, [&](std::string_view, std::string_view) {
      masked = true;
      return false;
    }));
    std::map<uint64_t, std::string> now;
    RETURN_IF_ERROR(ScanPrefix(t, keys::ChunkPrefix(ino, index), 0, [&](std::string_view k, std::string_view v) {
      uint32_t idx;
      uint64_t seq;
      if (keys::ParseChunkRecordKey(k, &idx, &seq)) now[seq] = std::string(v);
      return true;
    }));
    // Compare: every old record still there unchanged, nothing else below them, and no
    // truncation waiting to cut them (the new records would escape it).
    bool same = !masked;
    for (const auto& r : old) {
      auto it = now.find(r.seq);
      same = same && it != now.end() && it->second == EncodeSliceRecord(r);
    }
    for (const auto& [seq, v] : now) {
      bool was_read = std::any_of(old.begin(), old.end(), [&](const SliceRecord& r) { return r.seq == seq; });
      same = same && (was_read || seq > max_old);
    }
    if (!same) return Status::Err(EAGAIN, "chunk " + std::to_string(index) + " of inode " + std::to_string(ino) +
                                              " changed while it was compacted");
    // Swap.
    for (const auto& r : old) RETURN_IF_ERROR(t.Delete(keys::ChunkRecord(ino, index, r.seq)));
    for (const auto& r : fresh) RETURN_IF_ERROR(t.Put(keys::ChunkRecord(ino, index, r.seq), EncodeSliceRecord(r)));
    if (!staged.empty()) RETURN_IF_ERROR(SessionGuardTx(t, sid_));
    for (uint64_t id : staged) RETURN_IF_ERROR(t.Put(keys::Staged(id), keys::EncodeU64(sid_)));
    for (const auto& r : old) {
      if (r.id == 0) continue;
      RETURN_IF_ERROR(UnrefSlice(t, r.id, r.size));
      // Readers may hold the old map for a while (another client's open file): the
      // blocks go no earlier than release_after_ns (CleanPendingSlices).
      auto pending = t.Get(keys::PendingSlice(r.id, r.size));
      if (!pending.ok()) return pending.status();
      if (pending->has_value()) {
        RETURN_IF_ERROR(t.Put(keys::PendingSlice(r.id, r.size), keys::EncodeU64(static_cast<uint64_t>(release_after_ns))));
      }
    }
    return Status::OK();
  });
}

}  // namespace tierfs
