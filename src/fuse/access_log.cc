#include "fuse/access_log.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

namespace tierfs::fuse_internal {
namespace {

constexpr size_t kMaxQueued = 100000;  // lines per reader

struct Reader {
  std::deque<std::string> lines;
  uint64_t dropped = 0;
};

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, Reader> readers;  // guarded by mu
  uint64_t next_id = 1;                // guarded by mu
  std::atomic<int> active{0};
};

State& S() {
  static State* s = new State;
  return *s;
}

}  // namespace

bool AccessLog::Active() { return S().active.load(std::memory_order_relaxed) > 0; }

uint64_t AccessLog::Open() {
  State& s = S();
  std::lock_guard<std::mutex> l(s.mu);
  uint64_t id = s.next_id++;
  s.readers[id];
  s.active.store(static_cast<int>(s.readers.size()));
  return id;
}

void AccessLog::Close(uint64_t id) {
  State& s = S();
  std::lock_guard<std::mutex> l(s.mu);
  s.readers.erase(id);
  s.active.store(static_cast<int>(s.readers.size()));
  s.cv.notify_all();
}

void AccessLog::Add(const std::string& line) {
  State& s = S();
  {
    std::lock_guard<std::mutex> l(s.mu);
    for (auto& [id, r] : s.readers) {
      if (r.lines.size() >= kMaxQueued) {
        r.lines.pop_front();
        r.dropped++;
      }
      r.lines.push_back(line);
    }
  }
  s.cv.notify_all();
}

std::string AccessLog::Read(uint64_t id, size_t max, std::chrono::milliseconds wait) {
  State& s = S();
  std::unique_lock<std::mutex> l(s.mu);
  auto it = s.readers.find(id);
  if (it == s.readers.end()) return "";
  s.cv.wait_for(l, wait, [&] {
    auto i = s.readers.find(id);
    return i == s.readers.end() || !i->second.lines.empty();
  });
  it = s.readers.find(id);
  if (it == s.readers.end()) return "";
  Reader& r = it->second;
  std::string out;
  if (r.dropped) {
    out = "# " + std::to_string(r.dropped) + " lines dropped: the reader was too slow\n";
    r.dropped = 0;
  }
  while (!r.lines.empty() && out.size() + r.lines.front().size() <= max) {
    out += r.lines.front();
    r.lines.pop_front();
  }
  if (out.empty() && !r.lines.empty()) {  // one line longer than the read: cut it
    out = r.lines.front().substr(0, max);
    r.lines.pop_front();
  }
  return out;
}

}  // namespace tierfs::fuse_internal
