#include "tools/repack.h"

#include <spdlog/spdlog.h>

#include "chunk/block_key.h"
#include "common/clock.h"
#include "meta/meta.h"
#include "object/object_store.h"

namespace tierfs {

Result<RepackReport> Repack(Meta* meta, ObjectStore* store, const RepackOptions& opts) {
  const std::string volume = meta->format().name;
  RepackReport r;
  ASSIGN_OR_RETURN(auto packs, meta->ListPacks());
  for (const Meta::PackInfo& p : packs) {
    r.packs++;
    r.pack_bytes += p.len;
    r.live_bytes += p.live;
    if (static_cast<double>(p.live) >= opts.below * p.len) continue;
    r.sparse++;
    if (opts.dry_run) continue;
    const std::string old_key = PackKey(volume, p.pack, p.len);
    // Live members only, read from the old pack (verified by the store's checksums).
    std::string data;
    std::vector<PackedSlice> moved;
    Status read_error;
    for (const PackedSlice& m : p.members) {
      auto got = store->Get(old_key, m.off, m.size);
      if (!got.ok() || got->size() != m.size) {
        read_error = got.ok() ? Status::Err(EIO, "short read") : got.status();
        break;
      }
      moved.push_back(PackedSlice{m.id, static_cast<uint32_t>(data.size()), m.size});
      data.append(*got);
    }
    if (!read_error.ok()) {
      spdlog::warn("repack: cannot read the members of {} (left as it is): {}", old_key, read_error.ToString());
      continue;
    }
    ASSIGN_OR_RETURN(uint64_t id, meta->NewSliceId());
    uint32_t len = static_cast<uint32_t>(data.size());
    const std::string key = PackKey(volume, id, len);
    RETURN_IF_ERROR(store->Put(key, data).With("writing pack " + key));
    auto n = meta->MovePackMembers(p.pack, p.len, id, len, moved, NowNanos() + opts.release_grace_ns);
    if (!n.ok()) {
      // Perhaps committed after all: the new object stays for gc to judge.
      return n.status().With("moving the members of " + old_key);
    }
    r.repacked++;
    r.freed_bytes += p.len - p.live;
    if (opts.progress) {
      opts.progress("repacked " + old_key + ": " + std::to_string(*n) + " members, " + std::to_string(p.live) +
                    " of " + std::to_string(p.len) + " bytes live");
    }
  }
  return r;
}

}  // namespace tierfs
