// Small-file packing, metadata side: where packed slices live ("PL"), which slices each pack
// holds ("PM"), and dead packs awaiting deletion ("PX"). The data side is in
// chunk/writeback.h (packs are built from staged blocks) and tools/repack.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace {

// Whether the pack still has a member.
Result<bool> HasMembers(KvTxn& t, uint64_t pack) {
  bool any = false;
  RETURN_IF_ERROR(ScanPrefix(t, keys::PackMembersPrefix(pack), 1, [&](std::string_view, std::string_view) {
    any = true;
    return false;
  }));
  return any;
}

}  // namespace

namespace internal {

Status ResolvePacksTx(KvTxn& t, std::vector<SliceRecord>* recs) {
  for (SliceRecord& r : *recs) {
    if (!(r.flags & kRecordMayBePacked) || r.id == 0) continue;
    auto v = t.Get(keys::PackLocation(r.id));
    if (!v.ok()) return v.status();
    if (!v->has_value()) continue;  // not packed (yet): its block is stored on its own
    ByteReader br(**v);
    r.pack = br.U64();
    r.pack_len = br.U32();
    r.pack_off = br.U32();
    if (!br.ok()) return Status::Err(EIO, "corrupt pack location of slice " + std::to_string(r.id));
  }
  return Status::OK();
}

Status ReleasePackedTx(KvTxn& t, uint64_t id, bool* packed) {
  *packed = false;
  auto v = t.Get(keys::PackLocation(id));
  if (!v.ok()) return v.status();
  if (!v->has_value()) return Status::OK();
  ByteReader br(**v);
  uint64_t pack = br.U64();
  uint32_t pack_len = br.U32();
  if (!br.ok()) return Status::Err(EIO, "corrupt pack location of slice " + std::to_string(id));
  *packed = true;
  RETURN_IF_ERROR(t.Delete(keys::PackLocation(id)));
  RETURN_IF_ERROR(t.Delete(keys::PackMember(pack, id)));
  ASSIGN_OR_RETURN(bool any, HasMembers(t, pack));
  if (any) return Status::OK();
  return t.Put(keys::PendingPack(pack, pack_len), keys::EncodeU64(static_cast<uint64_t>(NowNanos())));
}

}  // namespace internal

Result<std::vector<uint64_t>> Meta::RecordPack(uint64_t pack, uint32_t pack_len, const std::vector<PackedSlice>& members) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  std::vector<uint64_t> recorded;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    recorded.clear();
    for (const PackedSlice& m : members) {
      // The staged mark says the slice is committed and alive (its release removes it).
      auto w = t.Get(keys::Staged(m.id));
      if (!w.ok()) return w.status();
      if (!w->has_value()) continue;
      RETURN_IF_ERROR(t.Put(keys::PackLocation(m.id), EncodePackLocation(pack, pack_len, m.off)));
      RETURN_IF_ERROR(t.Put(keys::PackMember(pack, m.id), EncodePackMember(pack_len, m.off, m.size)));
      RETURN_IF_ERROR(t.Delete(keys::Staged(m.id)));
      recorded.push_back(m.id);
    }
    if (recorded.empty()) {
      return t.Put(keys::PendingPack(pack, pack_len), keys::EncodeU64(static_cast<uint64_t>(NowNanos())));
    }
    return Status::OK();
  }));
  return recorded;
}

Result<size_t> Meta::MovePackMembers(uint64_t old_pack, uint32_t old_len, uint64_t pack, uint32_t pack_len,
                                     const std::vector<PackedSlice>& members, int64_t release_after_ns) {
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  size_t moved = 0;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    moved = 0;
    for (const PackedSlice& m : members) {
      auto old = t.Get(keys::PackMember(old_pack, m.id));
      if (!old.ok()) return old.status();
      if (!old->has_value()) continue;  // released meanwhile
      RETURN_IF_ERROR(t.Put(keys::PackLocation(m.id), EncodePackLocation(pack, pack_len, m.off)));
      RETURN_IF_ERROR(t.Put(keys::PackMember(pack, m.id), EncodePackMember(pack_len, m.off, m.size)));
      RETURN_IF_ERROR(t.Delete(keys::PackMember(old_pack, m.id)));
      moved++;
    }
    int64_t now = NowNanos();
    if (moved == 0) RETURN_IF_ERROR(t.Put(keys::PendingPack(pack, pack_len), keys::EncodeU64(now)));
    ASSIGN_OR_RETURN(bool any, HasMembers(t, old_pack));
    if (!any) {
      RETURN_IF_ERROR(t.Put(keys::PendingPack(old_pack, old_len),
                            keys::EncodeU64(static_cast<uint64_t>(std::max(now, release_after_ns)))));
    }
    return Status::OK();
  }));
  return moved;
}

Result<std::vector<Meta::PackInfo>> Meta::ListPacks() {
  std::map<uint64_t, PackInfo> packs;
  std::string after;
  for (;;) {
    size_t seen = 0;
    RETURN_IF_ERROR(engine_->Txn(
        [&](KvTxn& t) {
          seen = 0;
          std::string start = after.empty() ? std::string(keys::kPackMemberPrefix) : after + '\0';
          return t.Scan(start, PrefixEnd(std::string(keys::kPackMemberPrefix)), 1000,
                        [&](std::string_view k, std::string_view v) {
                          seen++;
                          after = std::string(k);
                          uint64_t pack, id;
                          if (!keys::ParsePackMemberKey(k, &pack, &id)) return true;
                          ByteReader br(v);
                          PackedSlice m;
                          m.id = id;
                          uint32_t len = br.U32();
                          m.off = br.U32();
                          m.size = br.U32();
                          if (!br.ok()) return true;
                          PackInfo& p = packs[pack];
                          p.pack = pack;
                          p.len = len;
                          p.live += m.size;
                          p.members.push_back(m);
                          return true;
                        });
        },
        true));
    if (seen < 1000) break;
  }
  std::vector<PackInfo> out;
  for (auto& [id, p] : packs) out.push_back(std::move(p));
  return out;
}

Result<std::vector<std::pair<uint64_t, uint32_t>>> Meta::PendingPacks() {
  std::vector<std::pair<uint64_t, uint32_t>> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        return ScanPrefix(t, std::string(keys::kPendingPackPrefix), 0, [&](std::string_view k, std::string_view) {
          uint64_t pack;
          uint32_t len;
          if (keys::ParsePendingPackKey(k, &pack, &len)) out.emplace_back(pack, len);
          return true;
        });
      },
      true));
  return out;
}

Status Meta::CleanPendingPacks() {
  if (!delete_pack_) return Status::OK();
  std::vector<std::pair<uint64_t, uint32_t>> due;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        due.clear();
        int64_t now = NowNanos();
        return ScanPrefix(t, std::string(keys::kPendingPackPrefix), 0, [&](std::string_view k, std::string_view v) {
          uint64_t pack;
          uint32_t len;
          if (keys::ParsePendingPackKey(k, &pack, &len) &&
              (v.size() != 8 || static_cast<int64_t>(keys::DecodeU64(v)) <= now)) {
            due.emplace_back(pack, len);
          }
          return due.size() < 1000;
        });
      },
      true));
  RETURN_IF_ERROR(HoldForReaders(&due, [](const std::pair<uint64_t, uint32_t>& p) {
    return keys::PendingPack(p.first, p.second);
  }));
  if (due.empty()) return Status::OK();
  RETURN_IF_ERROR(engine_->Sync());  // as for slices: the release is durable before the object goes
  std::vector<std::pair<uint64_t, uint32_t>> deleted;
  for (auto [pack, len] : due) {
    Status st = delete_pack_(pack, len);
    if (!st.ok()) {
      spdlog::warn("deleting pack {} failed, will retry: {}", pack, st.ToString());
      continue;
    }
    deleted.emplace_back(pack, len);
  }
  return engine_->Txn([&](KvTxn& t) {
    for (auto [pack, len] : deleted) RETURN_IF_ERROR(t.Delete(keys::PendingPack(pack, len)));
    return Status::OK();
  });
}

}  // namespace tierfs
