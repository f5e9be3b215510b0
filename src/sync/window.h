// The window of a sync run's decisions (syncer.cc): handed out in key order, carried out in
// any order by the copy threads, and the watermark, the last key up to which all are carried
// out, with the counts up to it (what checkpoint.h records and the run's summary reports).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "sync/entry.h"

namespace tierfs::sync {

class Window {
 public:
  // At most `max` decisions open at once: Open waits for room.
  explicit Window(size_t max) : max_(max) {}
  uint64_t Open(const std::string& key) {
    std::unique_lock<std::mutex> l(mu_);
    room_.wait(l, [&] { return items_.size() < max_; });
    uint64_t seq = next_++;
    items_[seq] = Item{key, Counts{}, false};
    return seq;
  }
  // Settles seq with its counts; when the watermark moved, hands it and the counts up to
  // it to moved, under the window's lock: watermarks reach moved in the order they moved.
  // (Handing them out after the lock let two threads apply theirs in the wrong order, and a
  // run's summary, taken from the last one applied, lost the later item's count.)
  void Close(uint64_t seq, const Counts& c, const std::function<void(const std::string&, const Counts&)>& moved) {
    std::lock_guard<std::mutex> l(mu_);
    Item& it = items_[seq];
    it.delta = c;
    it.done = true;
    bool any = false;
    while (!items_.empty() && items_.begin()->second.done) {
      Add(&total_, items_.begin()->second.delta);
      watermark_ = items_.begin()->second.key;
      items_.erase(items_.begin());
      any = true;
    }
    if (any) {
      room_.notify_all();
      moved(watermark_, total_);
    }
  }
  // The counts of every item settled in order so far.
  Counts Total() {
    std::lock_guard<std::mutex> l(mu_);
    return total_;
  }
  void SetBase(const Counts& c) { total_ = c; }
  static void Add(Counts* a, const Counts& b) {
    a->found += b.found;
    a->copied += b.copied;
    a->skipped += b.skipped;
    a->deleted += b.deleted;
    a->failed += b.failed;
    a->bytes += b.bytes;
    a->checked += b.checked;
  }

 private:
  struct Item {
    std::string key;
    Counts delta;
    bool done;
  };
  const size_t max_;
  std::mutex mu_;
  std::condition_variable room_;
  std::map<uint64_t, Item> items_;
  uint64_t next_ = 0;
  std::string watermark_;
  Counts total_;
};

}  // namespace tierfs::sync
