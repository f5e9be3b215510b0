#include "tools/gc.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "chunk/block_key.h"
#include "common/clock.h"
#include "meta/key_schema.h"
#include "meta/meta.h"
#include "object/object_store.h"

namespace tierfs {

Status DeleteSliceObjects(ObjectStore* store, const std::string& volume, uint32_t block_size, uint64_t id,
                          uint32_t size) {
  Status first;
  for (uint32_t i = 0; i < BlockCount(size, block_size); ++i) {
    Status st = store->Delete(BlockKey(volume, id, i, BlockLength(size, block_size, i)));
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

// "ID_INDEX_LEN" as the last key component, whatever the directories before it.
static bool LooksLikeBlock(const std::string& key) {
  std::string name = key.substr(key.rfind('/') + 1);
  int fields = 0;
  bool digit = false;
  for (char c : name) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c == '_' && digit) {
      fields++;
      digit = false;
    } else {
      return false;
    }
  }
  return digit && fields == 2;
}

Result<GcReport> CollectGarbage(Meta* meta, ObjectStore* store, const GcOptions& opts) {
  const std::string volume = meta->format().name;
  const uint32_t block_size = meta->format().block_size;
  auto say = [&](const std::string& m) {
    if (opts.progress) opts.progress(m);
  };
  GcReport r;

  // 1. Every slice the namespace refers to, and the slices already awaiting deletion. The
  //    ids are kept as one sorted array (8 bytes each, about 2 GB for 250 million slices)
  //    rather than a hash set, which costs five times that.
  std::vector<uint64_t> referenced;
  std::unordered_set<uint64_t> pending;
  uint64_t refs = 0;
  std::vector<DamagedRecord> damaged;
  RETURN_IF_ERROR(meta->ForEachSliceRef([&](uint64_t id, uint32_t) {
    referenced.push_back(id);
    if (++refs % 1000000 == 0) say("scanned " + std::to_string(refs) + " slice references");
    // Shared slices (copies, snapshots of chunks) repeat ids: compact now and then.
    if (referenced.size() >= (uint64_t{1} << 24) && (referenced.size() & (referenced.size() - 1)) == 0) {
      std::sort(referenced.begin(), referenced.end());
      referenced.erase(std::unique(referenced.begin(), referenced.end()), referenced.end());
    }
  }, &damaged));
  if (!damaged.empty()) {
    // A record that cannot be read may refer to any object: nothing can be called leaked.
    std::string list;
    for (size_t i = 0; i < damaged.size() && i < 10; ++i) list += "\n  " + keys::Describe(damaged[i].key);
    if (damaged.size() > 10) list += "\n  ... and " + std::to_string(damaged.size() - 10) + " more";
    return Status::Err(EIO, std::to_string(damaged.size()) +
                                " chunk record(s) cannot be decoded, so gc cannot tell which objects are in use; "
                                "nothing was deleted (`tierfs fsck` lists the files concerned):" + list);
  }
  std::sort(referenced.begin(), referenced.end());
  referenced.erase(std::unique(referenced.begin(), referenced.end()), referenced.end());
  referenced.shrink_to_fit();
  auto in_use = [&](uint64_t id) { return std::binary_search(referenced.begin(), referenced.end(), id); };
  ASSIGN_OR_RETURN(auto pending_slices, meta->PendingSlicesDue());
  const int64_t listed_at = NowNanos();
  for (const auto& p : pending_slices) {
    pending.insert(p.id);
    if (p.due_ns > listed_at) {
      r.held_slices++;
      r.held_bytes += p.size;
      r.held_until_ns = std::max(r.held_until_ns, p.due_ns);
    }
  }
  r.pending_slices = pending_slices.size();
  say("metadata: " + std::to_string(referenced.size()) + " slices in use, " + std::to_string(pending.size()) +
      " awaiting deletion");

  // 2. Every object under the volume's prefix. Listed after the scan: an object committed
  //    in between is young, and young objects are never touched.
  const std::string prefix = volume + "/chunks/";
  const int64_t now = NowNanos();
  // An object nothing refers to: left alone while younger than min_age (a client may be
  // about to commit it), else leaked, and deleted when asked.
  auto Unreferenced = [&](const ObjectInfo& o) {
    if (o.mtime_ns && now - o.mtime_ns < opts.min_age_ns) {
      r.young++;
      return;
    }
    r.leaked++;
    r.leaked_bytes += o.size;
    if (r.leaked_keys.size() < 100) r.leaked_keys.push_back(o.key);
    if (!opts.delete_garbage) return;
    Status st = store->Delete(o.key);
    if (st.ok()) {
      r.deleted++;
    } else {
      spdlog::warn("gc: deleting leaked object {} failed: {}", o.key, st.ToString());
    }
  };
  std::string after;
  for (;;) {
    ASSIGN_OR_RETURN(auto page, store->List(prefix, after, 1000));
    if (page.empty()) break;
    after = page.back().key;
    for (const auto& o : page) {
      r.objects++;
      r.object_bytes += o.size;
      std::string vol;
      uint64_t id;
      uint32_t index, len;
      bool block = ParseBlockKey(o.key, &vol, &id, &index, &len) && vol == volume;
      if (!block && !LooksLikeBlock(o.key)) {
        r.foreign++;
        continue;
      }
      // A block-named object outside its fan-out directory can never be read: garbage.
      if (block && in_use(id)) {
        r.referenced++;
        continue;
      }
      if (block && pending.count(id)) {
        r.pending++;
        continue;
      }
      Unreferenced(o);
    }
    if (r.objects % 100000 < 1000) say("listed " + std::to_string(r.objects) + " objects");
  }

  // 2b. Pack objects: live when a member is in them, else pending or leaked.
  {
    ASSIGN_OR_RETURN(auto packs, meta->ListPacks());
    ASSIGN_OR_RETURN(auto dead, meta->PendingPacks());
    std::unordered_set<uint64_t> live, pending_packs;
    for (const auto& p : packs) live.insert(p.pack);
    for (auto [pack, len] : dead) pending_packs.insert(pack);
    const std::string pack_prefix = volume + "/packs/";
    after.clear();
    for (;;) {
      ASSIGN_OR_RETURN(auto page, store->List(pack_prefix, after, 1000));
      if (page.empty()) break;
      after = page.back().key;
      for (const auto& o : page) {
        std::string vol;
        uint64_t pack;
        uint32_t len;
        if (!ParsePackKey(o.key, &vol, &pack, &len) || vol != volume) {
          r.foreign++;
          continue;
        }
        r.pack_objects++;
        r.pack_object_bytes += o.size;
        if (live.count(pack)) {
          r.packs_live++;
          continue;
        }
        if (pending_packs.count(pack)) {
          r.packs_pending++;
          continue;
        }
        // A pack being recorded right now is young; older ones no member points at are
        // garbage (a failed or interrupted upload).
        Unreferenced(o);
      }
    }
  }

  // 3. Pending deletions (and the rest of the background cleanup) when deleting, and
  //    repacking.
  if (opts.delete_garbage && !opts.mirror) {
    meta->SetSliceDeleter([store, volume, block_size](uint64_t id, uint32_t size) {
      return DeleteSliceObjects(store, volume, block_size, id, size);
    });
    meta->SetPackDeleter([store, volume](uint64_t pack, uint32_t len) {
      Status st = store->Delete(PackKey(volume, pack, len));
      return st.ok() || st.code() == ENOENT ? Status::OK() : st;
    });
    // Rounds until the unlinked files are gone and no more slices come due (a round
    // handles at most 1000 of each).
    // The trash's expired hours first, so that their files are deleted in these rounds.
    Status st = meta->ExpireTrash(NowNanos());
    size_t last_pending = SIZE_MAX;
    for (int round = 0; round < 100000 && st.ok(); ++round) {
      st = meta->RunCleanupOnce();
      if (!st.ok()) break;
      auto files = meta->HasPendingFiles();
      auto slices = meta->PendingSlices();
      if (!files.ok() || !slices.ok()) {
        st = files.ok() ? slices.status() : files.status();
        break;
      }
      if (!*files && slices->size() == last_pending) break;
      last_pending = slices->size();
      if (round % 10 == 9) say("cleanup: " + std::to_string(last_pending) + " slices still pending");
    }
    meta->SetSliceDeleter(nullptr);
    meta->SetPackDeleter(nullptr);
    RETURN_IF_ERROR(st);
  }
  if (opts.repack_below > 0 && !opts.mirror) {
    RepackOptions ro;
    ro.below = opts.repack_below;
    ro.release_grace_ns = opts.repack_grace_ns;
    ro.dry_run = !opts.delete_garbage;
    ro.progress = opts.progress;
    ASSIGN_OR_RETURN(r.repack, Repack(meta, store, ro));
  }
  return r;
}

}  // namespace tierfs
