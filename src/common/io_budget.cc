#include "common/io_budget.h"

#include <algorithm>

#include "common/clock.h"

namespace tierfs {
namespace {
thread_local IoBudget t_budget;
}  // namespace

IoBudget CurrentIoBudget() { return t_budget; }

ScopedIoBudget::ScopedIoBudget(IoBudget b) : saved_(t_budget) {
  IoBudget merged = saved_;
  if (b.deadline_ns != 0 && (merged.deadline_ns == 0 || b.deadline_ns < merged.deadline_ns)) {
    merged.deadline_ns = b.deadline_ns;
  }
  if (b.max_tries != 0 && (merged.max_tries == 0 || b.max_tries < merged.max_tries)) merged.max_tries = b.max_tries;
  t_budget = merged;
}

ScopedIoBudget::~ScopedIoBudget() { t_budget = saved_; }

IoBudget ScopedIoBudget::Within(int64_t ns) {
  IoBudget b;
  if (ns > 0) b.deadline_ns = MonoNanos() + ns;
  return b;
}

}  // namespace tierfs
