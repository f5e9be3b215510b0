// Deleting the blocks of released slices ("X" records, Meta::CleanPendingSlices), shared by
// every client's cleaner.
//
// Claims: each client's background work runs this, and before claims two clients deleted
// the same list in the same order, so every block was DELETEd twice on a volume with two
// busy cleaners (822 DELETEs for 500 blocks in test_liveness.py's slow store). Now a
// client takes a batch of kClaimBatch due records first, in one transaction that moves
// each record's "may go from" time kClaimNs ahead (the same field compaction's grace
// uses), deletes their blocks, and then, in one transaction, forgets the records whose
// blocks are gone and gives back the rest (due again at once, if the record still holds
// its claim). Records of a client that dies mid-batch become due again when the claim
// runs out. A claim that ran out while its DELETE hung may be taken by another client,
// which deletes the same blocks again: harmless, a DELETE of a missing object succeeds.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT

namespace {

constexpr size_t kClaimBatch = 64;
// How long a batch stays claimed: a round's time for deleting, with room for the last
// DELETE that started before the round's deadline.
constexpr int64_t kClaimNs = 3 * Meta::kCleanupRoundNs;

using SliceRef = std::pair<uint64_t, uint32_t>;

bool DueAt(std::string_view v, int64_t now) { return v.size() != 8 || static_cast<int64_t>(keys::DecodeU64(v)) <= now; }

}  // namespace

Status Meta::CleanPendingSlices() {
  if (!delete_slice_) return Status::OK();
  std::vector<SliceRef> pending;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        pending.clear();
        int64_t now = NowNanos();
        return ScanPrefix(t, std::string(keys::kPendingSlicePrefix), 0, [&](std::string_view k, std::string_view v) {
          uint64_t id;
          uint32_t size;
          // The value is the time from which the blocks may go (compaction sets it ahead,
          // and so does a claim).
          if (keys::ParseSliceKey(k, &id, &size) && DueAt(v, now)) pending.emplace_back(id, size);
          return pending.size() < 1000;
        });
      },
      true));
  RETURN_IF_ERROR(HoldForReaders(&pending, [](const SliceRef& p) { return keys::PendingSlice(p.first, p.second); }));
  if (pending.empty()) return Status::OK();
  // The transactions that released these slices must be on disk before their blocks go:
  // a power loss could otherwise roll the metadata back to a state that still points at
  // deleted blocks.
  RETURN_IF_ERROR(engine_->Sync());
  // A round stops deleting after kCleanupRoundNs: on a store where each DELETE takes 75 ms,
  // 1000 slices would hold the round for over a minute (the next round goes on).
  const int64_t deadline = MonoNanos() + kCleanupRoundNs;
  for (size_t from = 0; from < pending.size() && MonoNanos() <= deadline; from += kClaimBatch) {
    const size_t to = std::min(pending.size(), from + kClaimBatch);
    // Claim what is still due (another client may have claimed or deleted some).
    const std::string claim = keys::EncodeU64(static_cast<uint64_t>(NowNanos() + kClaimNs));
    std::vector<SliceRef> mine;
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) -> Status {
      mine.clear();
      const int64_t now = NowNanos();
      std::vector<std::string> ks;
      for (size_t i = from; i < to; ++i) ks.push_back(keys::PendingSlice(pending[i].first, pending[i].second));
      ASSIGN_OR_RETURN(auto vals, t.GetMany(ks));
      for (size_t i = 0; i < ks.size(); ++i) {
        if (!vals[i] || !DueAt(*vals[i], now)) continue;
        RETURN_IF_ERROR(t.Put(ks[i], claim));
        mine.push_back(pending[from + i]);
      }
      return Status::OK();
    }));
    std::vector<SliceRef> deleted, unfinished;
    for (const SliceRef& s : mine) {
      if (MonoNanos() > deadline) {
        unfinished.push_back(s);
        continue;
      }
      Status st = delete_slice_(s.first, s.second);
      if (!st.ok()) {
        spdlog::warn("deleting the blocks of slice {} failed, will retry: {}", s.first, st.ToString());
        unfinished.push_back(s);
        continue;
      }
      deleted.push_back(s);
    }
    // One transaction forgets every slice whose blocks are gone and gives back the rest.
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) -> Status {
      for (const SliceRef& s : deleted) RETURN_IF_ERROR(t.Delete(keys::PendingSlice(s.first, s.second)));
      const std::string now = keys::EncodeU64(static_cast<uint64_t>(NowNanos()));
      for (const SliceRef& s : unfinished) {
        const std::string k = keys::PendingSlice(s.first, s.second);
        ASSIGN_OR_RETURN(auto v, t.Get(k));
        if (v && *v == claim) RETURN_IF_ERROR(t.Put(k, now));
      }
      return Status::OK();
    }));
  }
  return Status::OK();
}

}  // namespace tierfs
