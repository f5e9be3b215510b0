// --bwlimit: one budget of bytes per second shared by every worker of a run. A worker
// that takes more than the budget allows sleeps until the rate is back under it; the
// burst is one second's worth.
#pragma once

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

namespace tierfs::sync {

class RateLimit {
 public:
  explicit RateLimit(double bytes_per_second) : rate_(bytes_per_second) {}
  void Take(size_t n) {
    if (rate_ <= 0) return;
    std::chrono::duration<double> wait{0};
    {
      std::lock_guard<std::mutex> l(mu_);
      auto now = std::chrono::steady_clock::now();
      double elapsed = std::chrono::duration<double>(now - last_).count();
      last_ = now;
      tokens_ = std::min(rate_, tokens_ + elapsed * rate_) - static_cast<double>(n);
      if (tokens_ < 0) wait = std::chrono::duration<double>(-tokens_ / rate_);
    }
    if (wait.count() > 0) std::this_thread::sleep_for(wait);
  }

 private:
  double rate_;
  std::mutex mu_;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace tierfs::sync
