// The cache's controls, as read-only virtual xattrs (`tierfs warmup`, `tierfs info`, tests):
//   tierfs.cache   on a file: how many of its blocks and bytes are cached, and where
//   tierfs.warmup  on a file: fetches its blocks into the cache, then answers as above
//                  plus what was fetched
//   tierfs.evict   on a file: drops its blocks from both cache levels
//   tierfs.stats   on the root: the client's cache and store counters
// Reading warmup or evict acts. A caller that asks for the size first (or whose buffer was
// too small) gets, on its next read of the same xattr within a few seconds, the answer the
// first read computed (KeepCacheAnswer) instead of a second run.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "chunk/block_key.h"
#include "chunk/cached_store.h"
#include "chunk/flat_files.h"
#include "meta/slice_map.h"
#include "common/clock.h"
#include "vfs/vfs.h"
#include "vfs/vfs_internal.h"

namespace tierfs {

namespace {
constexpr int kWarmThreads = 8;
constexpr int64_t kRememberNs = 5'000'000'000;
}  // namespace

bool Vfs::IsCacheXattr(const std::string& name) {
  return name == kCacheXattr || name == kWarmupXattr || name == kWarmupGroupXattr || name == kEvictXattr ||
         name == kStatsXattr || name == kCompactXattr || name == kRmrXattr || IsSummaryXattr(name);
}

Result<std::vector<std::pair<std::string, uint32_t>>> Vfs::FileBlocks(Ino ino) {
  auto st = State(ino);
  RETURN_IF_ERROR(FlushInode(*st));
  ASSIGN_OR_RETURN(Attr a, meta_->GetAttr(ino));
  std::vector<std::pair<std::string, uint32_t>> out;
  if (!a.IsRegular()) return out;
  const uint32_t bs = store_->config().block_size;
  std::set<std::string> seen;
  ASSIGN_OR_RETURN(auto maps, ReadSliceMaps(meta_, ino));
  for (const auto& chunk : maps) {
    for (const auto& s : chunk.second) {
      if (s.id == 0) continue;
      for (const BlockSpan& span : BlockSpans(s.size, bs, s.off, s.len)) {
        uint32_t len = BlockLength(s.size, bs, span.index);
        std::string key = store_->KeyOf(s.id, span.index, len, PackRef{s.pack, s.pack_len, s.pack_off});
        if (seen.insert(key).second) out.emplace_back(std::move(key), len);
      }
    }
  }
  return out;
}

Result<std::string> Vfs::CacheXattr(const Ctx& ctx, Ino ino, const std::string& name) {
  if (name == kStatsXattr) {
    if (ino != opts_.root) return Status::Err(ENODATA, name + " is on the mount's root only");
    return StatsJson();
  }
  if (IsSummaryXattr(name)) return Summary(ctx, ino, name);
  const bool group = name == kWarmupGroupXattr;
  bool acts = name == kWarmupXattr || group || name == kEvictXattr || name == kCompactXattr || name == kRmrXattr;
  if (acts) {
    RETURN_IF_ERROR(Access(ctx, ino, R_OK));
    std::lock_guard<std::mutex> l(cache_ops_mu_);
    auto it = cache_ops_.find({ino, name});
    if (it != cache_ops_.end()) {
      auto kept = std::move(it->second);
      cache_ops_.erase(it);
      if (MonoNanos() - kept.first < kRememberNs) return kept.second;
    }
  }
  if (name == kCompactXattr) return Compact(ino);
  if (name == kRmrXattr) {
    ASSIGN_OR_RETURN(auto p, meta_->RemoveContents(ctx, ino, kRmrBudget));
    return nlohmann::json{{"files", p.files}, {"dirs", p.dirs}, {"done", p.done}}.dump();
  }
  ASSIGN_OR_RETURN(auto blocks, FileBlocks(ino));
  nlohmann::json j;
  uint64_t bytes = 0;
  for (const auto& b : blocks) bytes += b.second;
  j["blocks"] = blocks.size();
  j["bytes"] = bytes;
  if (name == kEvictXattr) {
    for (const auto& b : blocks) store_->EvictBlock(b.first);
    j["evicted_blocks"] = blocks.size();
  } else if (name == kWarmupXattr || group) {
    std::atomic<size_t> next{0};
    std::atomic<uint64_t> fetched_blocks{0}, fetched_bytes{0}, owner_blocks{0};
    std::mutex err_mu;
    Status first_error;
    auto work = [&] {
      for (size_t i = next++; i < blocks.size(); i = next++) {
        bool fetched = false, remote = false;
        Status s = group ? store_->WarmBlockForGroup(blocks[i].first, blocks[i].second, &fetched, &remote)
                         : store_->WarmBlock(blocks[i].first, blocks[i].second, &fetched);
        if (remote) owner_blocks++;
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(err_mu);
          if (first_error.ok()) first_error = s;
          continue;
        }
        if (fetched) {
          fetched_blocks++;
          fetched_bytes += blocks[i].second;
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < std::min<int>(kWarmThreads, static_cast<int>(blocks.size())); ++t) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
    if (!first_error.ok()) {
      spdlog::error("warm-up of inode {}: {}", ino, first_error.ToString());
      return Status::Err(EIO, "warm-up of inode " + std::to_string(ino) + ": " + first_error.message());
    }
    j["fetched_blocks"] = fetched_blocks.load();
    j["fetched_bytes"] = fetched_bytes.load();
    if (group) j["owner_blocks"] = owner_blocks.load();
  }
  uint64_t disk_blocks = 0, disk_bytes = 0, mem_blocks = 0, mem_bytes = 0;
  for (const auto& b : blocks) {
    int level = store_->CachedLevel(b.first);
    if (level == 2) {
      disk_blocks++;
      disk_bytes += b.second;
    } else if (level == 1) {
      mem_blocks++;
      mem_bytes += b.second;
    }
  }
  j["cached_blocks"] = disk_blocks + mem_blocks;
  j["cached_bytes"] = disk_bytes + mem_bytes;
  j["disk_blocks"] = disk_blocks;
  j["memory_only_blocks"] = mem_blocks;
  return j.dump();
}

Result<std::string> Vfs::Compact(Ino ino) {
  if (!compactor_) return Status::Err(EROFS, "the volume is mounted read-only");
  auto st = State(ino);
  RETURN_IF_ERROR(FlushInode(*st));
  ASSIGN_OR_RETURN(Attr a, meta_->GetAttr(ino));
  if (!a.IsRegular()) return Status::Err(EINVAL, "only regular files are compacted");
  ASSIGN_OR_RETURN(CompactStats c, compactor_->CompactFile(ino, /*force=*/true));
  nlohmann::json j = {{"chunks", c.chunks},           {"compacted", c.compacted},
                      {"conflicts", c.conflicts},     {"records_before", c.records_before},
                      {"records_after", c.records_after}, {"live_bytes", c.live_bytes},
                      {"dead_bytes", c.dead_bytes}};
  return j.dump();
}

void Vfs::KeepCacheAnswer(Ino ino, const std::string& name, std::string answer) {
  if (name != kWarmupXattr && name != kWarmupGroupXattr && name != kEvictXattr && name != kCompactXattr) return;
  std::lock_guard<std::mutex> l(cache_ops_mu_);
  int64_t now = MonoNanos();
  for (auto it = cache_ops_.begin(); it != cache_ops_.end();) {
    it = now - it->second.first >= kRememberNs ? cache_ops_.erase(it) : std::next(it);
  }
  cache_ops_[{ino, name}] = {now, std::move(answer)};
}

std::string Vfs::StatsJson() {
  StoreStats s = store_->stats();
  const DiskCacheStats& d = s.disk;
  nlohmann::json j = {
      {"memory", {{"hits", s.cache_hits}, {"misses", s.cache_misses}, {"bytes", s.cache_bytes},
                  {"blocks", s.cache_blocks}, {"evictions", s.evictions},
                  {"capacity", store_->cache()->capacity()}}},
      {"disk", {{"hits", d.hits}, {"misses", d.misses}, {"bytes", d.bytes}, {"blocks", d.blocks},
                {"evictions", d.evictions}, {"writes", d.writes}, {"dropped_writes", d.dropped_writes},
                {"queue_limit", d.queue_limit}, {"write_bytes_per_s", d.write_bytes_per_s},
                {"corrupt", d.corrupt}, {"errors", d.errors}, {"capacity", d.capacity}, {"dirs", d.dirs},
                {"dirs_down", d.dirs_down}}},
      {"store", {{"gets", s.gets}, {"ranged_gets", s.ranged_gets}, {"bytes_downloaded", s.bytes_downloaded},
                 {"puts", s.puts}, {"bytes_uploaded", s.bytes_uploaded}, {"upload_failures", s.upload_failures},
                 {"staged_waits", s.staged_waits}}},
      {"meta", {{"cached_opens", cached_opens()}}}};
  if (s.writeback) {
    j["writeback"] = {{"staged_blocks", s.staged_blocks},       {"staged_bytes", s.staged_bytes},
                      {"uploaded_blocks", s.wb_uploaded_blocks}, {"uploaded_bytes", s.wb_uploaded_bytes},
                      {"retries", s.wb_retries},                 {"stage_errors", s.wb_stage_errors},
                      {"lost", s.wb_lost},
                      {"packs", s.packs},
                      {"packed_blocks", s.packed_blocks}};
  }
  if (DiskCache* dc = store_->disk()) j["disk"]["roots"] = dc->roots();
  if (flat_) {
    FlatFilesStats f = flat_->stats();
    j["flat_copies"] = {{"copies", f.copies}, {"bytes", f.bytes},       {"capacity", f.capacity},
                        {"built", f.built},   {"verified", f.verified}, {"damaged", f.damaged},
                        {"evicted", f.evicted}, {"failed", f.failed}, {"root", flat_->root()}};
  }
  if (opts_.metrics_stats) {
    auto m = nlohmann::json::parse(opts_.metrics_stats(), nullptr, false);
    if (m.is_object()) j["metrics"] = m;
    j["metrics_addr"] = opts_.metrics_addr;
  }
  if (opts_.group_stats) {
    auto g = nlohmann::json::parse(opts_.group_stats(), nullptr, false);
    if (g.is_object()) {
      g["peer_hits"] = s.peer_hits;
      g["peer_bytes"] = s.peer_bytes;
      g["peer_failures"] = s.peer_failures;
      g["peer_hedged"] = s.peer_hedged;
      g["served_blocks"] = s.peer_served;
      g["served_bytes"] = s.peer_served_bytes;
      j["group"] = g;
    }
  }
  return j.dump();
}

}  // namespace tierfs
