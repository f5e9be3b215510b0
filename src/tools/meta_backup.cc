#include "tools/meta_backup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <ostream>

#include "common/clock.h"
#include "common/zstd_stream.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "object/object_store.h"

namespace tierfs {

namespace {
std::string Prefix(const std::string& volume) { return volume + "/meta/"; }
}  // namespace

Result<std::vector<std::string>> ListMetadataBackups(ObjectStore* store, const std::string& volume) {
  std::vector<std::string> out;
  std::string after;
  for (;;) {
    ASSIGN_OR_RETURN(auto page, store->List(Prefix(volume), after, 1000));
    if (page.empty()) break;
    after = page.back().key;
    for (const auto& o : page) {
      if (o.key.find("/dump-") != std::string::npos && o.key.ends_with(".json.zst")) out.push_back(o.key);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::string> BackupMetadata(Meta* meta, ObjectStore* store, int keep) {
  const std::string volume = meta->format().name;
  ZstdWriter z;
  {
    std::ostream out(&z);
    DumpStats stats;
    // A dump that finds damaged records fails (meta_dump.h): a backup missing them is never
    // written, and so never replaces a complete one.
    RETURN_IF_ERROR(DumpVolume(meta->engine(), out, /*keep_secrets=*/false, nullptr, &stats).With("backup"));
    out.flush();
  }
  RETURN_IF_ERROR(z.Finish());
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string key = Prefix(volume) + "dump-" + stamp + ".json.zst";
  RETURN_IF_ERROR(store->Put(key, z.out()).With("writing backup " + key));
  ASSIGN_OR_RETURN(auto all, ListMetadataBackups(store, volume));
  for (size_t i = 0; i + static_cast<size_t>(std::max(1, keep)) < all.size(); ++i) {
    Status st = store->Delete(all[i]);
    if (!st.ok()) spdlog::warn("cannot delete old metadata backup {}: {}", all[i], st.ToString());
  }
  return key;
}

BackupLoop::BackupLoop(Meta* meta, ObjectStore* store, int64_t interval_s, int keep)
    : meta_(meta), store_(store), interval_s_(interval_s), keep_(keep), thread_([this] { Run(); }) {}

BackupLoop::~BackupLoop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackupLoop::Run() {
  // Ask about four times per interval (at most once a minute), so that a backup follows
  // the previous one by at most a quarter interval more than the interval.
  auto step = std::chrono::seconds(std::clamp<int64_t>(interval_s_ / 4, 1, 60));
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, step, [&] { return stop_; })) {
    l.unlock();
    auto turn = meta_->ClaimBackup(interval_s_ * 1'000'000'000LL);
    if (!turn.ok()) {
      spdlog::warn("metadata backup: cannot ask for a turn: {}", turn.status().ToString());
    } else if (*turn) {
      int64_t t0 = MonoNanos();
      auto key = BackupMetadata(meta_, store_, keep_);
      Status done = meta_->BackupDone(key.ok());
      if (key.ok()) {
        spdlog::info("metadata backup written to {} in {:.1f} s", *key, static_cast<double>(MonoNanos() - t0) / 1e9);
      } else {
        // Nothing was written and nothing rotated: the earlier backups stay as they were.
        spdlog::error("metadata backup failed, earlier backups kept: {}", key.status().ToString());
      }
      if (!done.ok()) spdlog::warn("metadata backup: cannot record it: {}", done.ToString());
    }
    l.lock();
  }
}

}  // namespace tierfs
