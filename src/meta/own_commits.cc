#include "meta/own_commits.h"

namespace tierfs {

namespace {
constexpr size_t kOwnCommitsKept = 4096;
}  // namespace

void OwnCommits::Add(const std::string& marker) {
  std::lock_guard<std::mutex> l(mu_);
  if (!set_.insert(marker).second) return;
  order_.push_back(marker);
  if (order_.size() > kOwnCommitsKept) {
    set_.erase(order_.front());
    order_.pop_front();
  }
}

bool OwnCommits::Contains(const std::string& marker) {
  std::lock_guard<std::mutex> l(mu_);
  return set_.count(marker) != 0;
}

}  // namespace tierfs
