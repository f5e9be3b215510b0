// Registered readers of the change log (change_log.h), and what the volume keeps for them.
//
// A reader that must not miss a record (a mirror's replicator, mirror/replicator.h)
// registers under a name and says, as it goes, the last commit it has applied:
//
//   "MC" name -> JSON ChangeConsumer (docs/key-schema.md); not itself logged.
//
// While a registered reader is live (heard from within kConsumerExpiryNs), the volume keeps
// for it:
//   - the change log from the first record it has not applied, whatever --changelog-hours
//     says (TrimChangeLog's keep_from);
//   - the blocks and packs of data released by commits it has not applied yet
//     (ReleaseHold): a mirror that lags behind the overwrite of a file still finds the
//     file's old blocks, in the primary's store, when it applies the commits before it.
// A reader silent for longer is dead to the volume: it holds nothing back any more, and
// when it comes back it finds the log trimmed past it and must be re-seeded. `tierfs
// changelog META-URL --drop-consumer NAME` forgets one at once.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "meta/kv_engine.h"

namespace tierfs {

inline constexpr int64_t kConsumerExpiryNs = 7LL * 24 * 3600 * 1'000'000'000;

struct ChangeConsumer {
  std::string name;         // unique per reader: a mirror's is "mirror:" + its engine
  std::string what;         // a line for `tierfs status`
  uint64_t applied = 0;     // the last commit it holds; it needs every later one
  int64_t applied_ns = 0;   // that commit's time
  int64_t updated_ns = 0;   // when it last said so (its clock)

  bool Live(int64_t now_ns) const { return now_ns - updated_ns < kConsumerExpiryNs; }
};

std::string ChangeConsumerKey(const std::string& name);
Status PutChangeConsumer(KvEngine* engine, const ChangeConsumer& c);
// ENOENT naming the consumers there are when there is none by that name.
Status DropChangeConsumer(KvEngine* engine, const std::string& name);
// Every registered consumer, live or not; a damaged record is an EIO naming its key.
Result<std::vector<ChangeConsumer>> ReadChangeConsumers(KvEngine* engine);
// The lowest `applied` of the live consumers; nullopt when none is registered and live.
Result<std::optional<uint64_t>> ChangeConsumersFloor(KvEngine* engine, int64_t now_ns);

// Decides which released objects (pending slices "X", dead packs "PX") may be deleted now.
// An object found due while the change log's last commit was L was released by a commit
// at or before L; it may go once every live consumer applied L. The first L each key was
// seen at is remembered here (per process: a client that restarts sees them anew, at a
// later L, which only holds them longer). Thread-safe.
class ReleaseHold {
 public:
  // due_keys: found due by a scan that ran before this call. Returns the indexes of those
  // that may be deleted now (all of them when no consumer is registered and live).
  Result<std::vector<size_t>> MayGo(KvEngine* engine, const std::vector<std::string>& due_keys);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, uint64_t> first_seen_;  // key -> the log's last commit then
};

}  // namespace tierfs
