// `tierfs summary`: the "tierfs.summary" virtual xattr walks a tree from metadata in steps
// (Meta::SummaryStep). The first read starts a walk and names it with a token; reads of
// "tierfs.summary.TOKEN" continue it. Every answer holds the totals so far, so an answer
// lost to a size probe costs nothing, and a finished walk answers again until dropped.
#include <atomic>
#include <random>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "vfs/vfs.h"

namespace tierfs {

struct SummaryState {
  std::mutex mu;  // one step at a time
  Ino ino = 0;
  uint32_t uid = 0;
  Meta::SummaryWalk walk;
  std::atomic<int64_t> touched_ns{0};
};

namespace {
constexpr int64_t kSummaryIdleNs = 60'000'000'000;
}  // namespace

bool Vfs::IsSummaryXattr(const std::string& name) {
  const std::string base = kSummaryXattr;
  return name == base || (name.size() > base.size() + 1 && name.compare(0, base.size() + 1, base + ".") == 0);
}

Result<std::string> Vfs::Summary(const Ctx& ctx, Ino ino, const std::string& name) {
  const std::string base = kSummaryXattr;
  std::shared_ptr<SummaryState> s;
  uint64_t token = 0;
  {
    std::lock_guard<std::mutex> l(summaries_mu_);
    int64_t now = MonoNanos();
    for (auto it = summaries_.begin(); it != summaries_.end();) {
      it = now - it->second->touched_ns.load() > kSummaryIdleNs ? summaries_.erase(it) : std::next(it);
    }
    if (name == base) {
      static std::mt19937_64 rng{std::random_device{}()};
      do token = rng() >> 1; while (token == 0 || summaries_.count(token));
      s = std::make_shared<SummaryState>();
      s->ino = ino;
      s->uid = ctx.uid;
      summaries_[token] = s;
    } else {
      token = std::strtoull(name.c_str() + base.size() + 1, nullptr, 10);
      auto it = summaries_.find(token);
      if (it == summaries_.end() || it->second->ino != ino || it->second->uid != ctx.uid) {
        return Status::Err(ENODATA, name + ": no such summary walk of this file (unread for a minute, or never started)");
      }
      s = it->second;
    }
    s->touched_ns = now;
  }
  std::lock_guard<std::mutex> l(s->mu);
  // What this client buffered is counted too: committed before the walk starts.
  if (!s->walk.started) RETURN_IF_ERROR(FlushAll());
  Status st = meta_->SummaryStep(ctx, ino, &s->walk, kSummaryBudget);
  if (!st.ok()) {
    std::lock_guard<std::mutex> g(summaries_mu_);
    summaries_.erase(token);
    return st;
  }
  const Meta::SummaryWalk& w = s->walk;
  s->touched_ns = MonoNanos();
  return nlohmann::json{{"token", std::to_string(token)}, {"bytes", w.bytes},           {"allocated", w.allocated},
                        {"files", w.files},               {"dirs", w.dirs},             {"unreadable", w.unreadable},
                        {"done", w.done}}
      .dump();
}

}  // namespace tierfs
