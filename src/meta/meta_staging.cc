// Staging areas of write-back clients ("SW" records, key_schema.h): where a session stages
// blocks it has not uploaded yet, kept past the session's end while any of its slices is
// still marked staged ("W"), so that `tierfs status` and `fsck` can say on which host and
// in which directory acknowledged data waits, also after a killed client's session was
// purged.
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

Status Meta::RecordStagingArea(const std::string& dir) {
  if (sid_ == 0) return Status::Err(EINVAL, "no session to record a staging area for");
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  nlohmann::json j = {{"host", host}, {"dir", dir}, {"started_ns", NowNanos()}};
  return engine_->Txn([&](KvTxn& t) { return t.Put(keys::StagingArea(sid_), j.dump()); });
}

Status Meta::DropStagingArea() {
  if (sid_ == 0) return Status::OK();
  return engine_->Txn([&](KvTxn& t) { return t.Delete(keys::StagingArea(sid_)); });
}

Result<std::vector<Meta::StagingArea>> Meta::StagingAreas() {
  std::map<uint64_t, StagingArea> areas;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) -> Status {
        areas.clear();
        RETURN_IF_ERROR(ScanPrefix(t, std::string(keys::kStagingAreaPrefix), 0, [&](std::string_view k, std::string_view v) {
          uint64_t sid = 0;
          if (!keys::ParseInoKey(k, &sid)) return true;
          StagingArea& a = areas[sid];
          a.sid = sid;
          auto j = nlohmann::json::parse(v, nullptr, false);
          if (j.is_object()) {
            a.host = j.value("host", "");
            a.dir = j.value("dir", "");
          }
          return true;
        }));
        RETURN_IF_ERROR(ScanPrefix(t, std::string(keys::kStagedPrefix), 0, [&](std::string_view k, std::string_view v) {
          if (k.size() != 9 || v.size() != 8) return true;
          uint64_t sid = keys::DecodeU64(v);
          StagingArea& a = areas[sid];
          a.sid = sid;
          a.slices++;
          return true;
        }));
        int64_t now = NowNanos();
        for (auto& [sid, a] : areas) {
          ASSIGN_OR_RETURN(auto hb, t.Get(keys::Heartbeat(sid)));
          a.alive = hb && now - static_cast<int64_t>(keys::DecodeU64(*hb)) < opts_.session_timeout_ns;
        }
        return Status::OK();
      },
      true));
  std::vector<StagingArea> out;
  for (auto& [sid, a] : areas) out.push_back(std::move(a));
  return out;
}

Status Meta::PruneStagingAreas() {
  ASSIGN_OR_RETURN(auto areas, StagingAreas());
  for (const StagingArea& a : areas) {
    if (a.alive || a.slices > 0 || a.sid == sid_) continue;
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) -> Status {
      // Again in the transaction: a mark added meanwhile (a session cannot come back, but
      // the check costs one scan of a short prefix) keeps the record.
      bool marked = false;
      RETURN_IF_ERROR(ScanPrefix(t, std::string(keys::kStagedPrefix), 0, [&](std::string_view, std::string_view v) {
        marked = v.size() == 8 && keys::DecodeU64(v) == a.sid;
        return !marked;
      }));
      if (marked) return Status::OK();
      return t.Delete(keys::StagingArea(a.sid));
    }));
  }
  return Status::OK();
}

}  // namespace tierfs
