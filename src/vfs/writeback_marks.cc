#include "vfs/writeback_marks.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

#include "chunk/writeback.h"
#include "meta/meta.h"

namespace tierfs {

StagedCheck StagedCheckFor(Meta* meta) {
  return [meta](uint64_t id) {
    StagedInfo info;
    auto mark = meta->StagedBy(id);
    if (!mark.ok()) {
      // Cannot tell: treat as staged by a live writer, so the read retries rather than
      // reporting a block missing that may only be on its way.
      spdlog::warn("cannot read the staged mark of slice {}: {}", id, mark.status().ToString());
      info.staged = info.writer_alive = true;
      info.where = "an unknown client";
      return info;
    }
    if (!*mark) return info;
    info.staged = true;
    info.writer_alive = (*mark)->alive;
    info.where = "host " + ((*mark)->host.empty() ? std::string("?") : (*mark)->host) + " (session " +
                 std::to_string((*mark)->sid) + ")";
    return info;
  };
}

WritebackMarks::WritebackMarks(Meta* meta, CachedStore* store) : meta_(meta), store_(store) {
  thread_ = std::thread([this] { Loop(); });
}

WritebackMarks::~WritebackMarks() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  Sweep();
}

void WritebackMarks::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::seconds(1), [&] { return stop_; });
    if (stop_) break;
    l.unlock();
    Sweep();
    l.lock();
  }
}

void WritebackMarks::Sweep() {
  std::vector<uint64_t> done = store_->TakeUploadedMarks();
  Status st = meta_->ClearStaged(done);
  if (!st.ok()) {
    spdlog::warn("write-back: cannot drop the staged marks of {} uploaded slices (trying again): {}", done.size(),
                 st.ToString());
    for (uint64_t id : done) store_->MarkStaged(id);
  }
  uint64_t staged = store_->stats().staged_bytes;
  if (staged != published_) {
    Status up = meta_->UpdateSession([&](SessionInfo& s) { s.staged_bytes = staged; });
    if (up.ok()) published_ = staged;
  }
}

}  // namespace tierfs
