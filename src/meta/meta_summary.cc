// `tierfs summary`: the bytes, files and directories of a tree, counted from metadata in
// batched read transactions (entries, then their attributes), walked in steps so that the
// caller can show progress.
#include "meta/meta.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace {
constexpr size_t kSummaryBatch = 1000;  // entries read per transaction

void Count(Ino ino, const Attr& a, Meta::SummaryWalk* w) {
  if (a.IsDir()) {
    w->dirs++;
    return;
  }
  if (a.nlink > 1 && !w->linked.insert(ino).second) return;  // another link of a counted file
  w->files++;
  if (a.IsRegular()) {
    w->bytes += a.length;
    w->allocated += a.allocated;
  }
}
}  // namespace

Status Meta::SummaryStep(const Ctx& ctx, Ino top, SummaryWalk* w, uint64_t budget) {
  if (w->done) return Status::OK();
  if (!w->started) {
    ASSIGN_OR_RETURN(Attr a, GetAttr(top));
    w->started = true;
    Count(top, a, w);
    if (a.IsDir()) {
      w->pending.push_back(top);
    } else {
      w->done = true;
      return Status::OK();
    }
  }
  uint64_t visited = 0;
  while (visited < budget) {
    if (w->dir == 0) {
      if (w->pending.empty()) {
        w->done = true;
        return Status::OK();
      }
      w->dir = w->pending.back();
      w->pending.pop_back();
      w->after.clear();
    }
    const bool first = w->after.empty();
    std::vector<std::pair<Ino, Attr>> batch;
    size_t scanned = 0;
    std::string last;
    bool denied = false;
    RETURN_IF_ERROR(engine_->Txn(
        [&](KvTxn& t) {
          batch.clear();
          scanned = 0;
          denied = false;
          if (first) {
            Attr da;
            Status st = GetAttrTx(t, w->dir, &da);
            if (st.code() == ENOENT) return Status::OK();  // removed meanwhile: nothing in it
            RETURN_IF_ERROR(st);
            if (!da.IsDir()) return Status::OK();
            Status acc = CheckAccessTx(t, ctx, w->dir, da, R_OK | X_OK);
            if (acc.code() == EACCES) {
              denied = true;
              return Status::OK();
            }
            RETURN_IF_ERROR(acc);
          }
          const std::string prefix = keys::DentryPrefix(w->dir);
          std::string from = prefix;
          if (!first) from.append(w->after).push_back('\0');
          std::vector<Ino> inos;
          RETURN_IF_ERROR(t.Scan(from, PrefixEnd(prefix), kSummaryBatch, [&](std::string_view k, std::string_view v) {
            scanned++;
            last.assign(k.substr(prefix.size()));
            ByteReader r(v);
            inos.push_back(r.U64());
            return true;
          }));
          for (Ino ino : inos) {
            Attr a;
            Status st = GetAttrTx(t, ino, &a);
            if (st.code() == ENOENT) continue;
            RETURN_IF_ERROR(st);
            batch.emplace_back(ino, a);
          }
          return Status::OK();
        },
        true));
    visited += scanned + 1;
    if (denied) w->unreadable++;
    for (const auto& [ino, a] : batch) {
      Count(ino, a, w);
      if (a.IsDir()) w->pending.push_back(ino);
    }
    if (scanned < kSummaryBatch) {
      w->dir = 0;  // read to its end
    } else {
      w->after = last;
    }
  }
  return Status::OK();
}

}  // namespace tierfs
