// Access times: reads update an inode's atime by the mount's rule (relatime by default),
// written by the vfs in batches (vfs_atime.cc), never on the read's own path.
#include <algorithm>

#include "common/clock.h"
#include "meta/change_log.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace {
constexpr int64_t kDayNs = 24ll * 3600 * 1000000000;
constexpr size_t kAtimeBatch = 256;
}  // namespace

bool AtimeDue(AtimeMode mode, int64_t atime_ns, int64_t mtime_ns, int64_t ctime_ns, int64_t read_ns) {
  if (mode == AtimeMode::kNone || read_ns <= atime_ns) return false;
  if (mode == AtimeMode::kStrict) return true;
  // relatime (Linux's default): once after each change, and at least once a day.
  return atime_ns <= mtime_ns || atime_ns <= ctime_ns || read_ns - atime_ns >= kDayNs;
}

Status Meta::TouchAtimes(const std::vector<std::pair<Ino, int64_t>>& reads, AtimeMode mode) {
  if (opts_.read_only || mode == AtimeMode::kNone) return Status::OK();
  for (const auto& r : reads) ForgetDir(r.first);  // directories' attributes cached here
  UnloggedScope unlogged;  // access times are not changes for the change log's readers
  for (size_t from = 0; from < reads.size(); from += kAtimeBatch) {
    const size_t to = std::min(reads.size(), from + kAtimeBatch);
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
      for (size_t i = from; i < to; ++i) {
        auto [ino, read_ns] = reads[i];
        Attr a;
        Status st = GetAttrTx(t, ino, &a);
        if (st.code() == ENOENT) continue;  // removed meanwhile
        RETURN_IF_ERROR(st);
        // Judged again on what the engine holds now: another client (or a utimensat) may
        // have set a later atime meanwhile. The ctime stays: reading changes no attribute.
        if (!AtimeDue(mode, a.atime_ns, a.mtime_ns, a.ctime_ns, read_ns)) continue;
        a.atime_ns = read_ns;
        RETURN_IF_ERROR(PutAttrTx(t, ino, a));
      }
      return Status::OK();
    }));
  }
  return Status::OK();
}

}  // namespace tierfs
