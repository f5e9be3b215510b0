#include "chunk/writeback.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "chunk/block_key.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/io_budget.h"

namespace tierfs {

namespace {

uint64_t SliceOf(const std::string& key) {
  std::string volume;
  uint64_t id = 0;
  uint32_t index = 0, len = 0;
  return ParseBlockKey(key, &volume, &id, &index, &len) ? id : 0;
}

}  // namespace

Writeback::Writeback(std::unique_ptr<Staging> staging, const std::vector<Staging::Entry>& recovered, PutFn put,
                     DeleteFn del, UploadedFn uploaded, Options opts, PackFn pack)
    : staging_(std::move(staging)),
      put_(std::move(put)),
      del_(std::move(del)),
      uploaded_(std::move(uploaded)),
      opts_(opts),
      pack_(std::move(pack)),
      next_seq_(staging_->first_free_seq()) {
  for (const Staging::Entry& e : recovered) {
    Item item;
    item.seq = e.seq;
    item.len = e.len;
    items_[e.key] = item;
    queue_.push_back(e.key);
    slice_blocks_[SliceOf(e.key)]++;
    // Their slices were committed with a staged mark by the process that staged them.
    marks_.insert(SliceOf(e.key));
    st_.staged_blocks++;
    st_.staged_bytes += e.len;
  }
  if (!recovered.empty()) {
    spdlog::info("write-back: {} blocks ({} bytes) staged by an earlier process in {}; uploading them first",
                 st_.staged_blocks, st_.staged_bytes, staging_->dir());
  }
  for (int i = 0; i < std::max(1, opts_.threads); ++i) threads_.emplace_back([this] { UploadLoop(); });
}

Writeback::~Writeback() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

Status Writeback::Stage(const std::string& key, std::shared_ptr<const std::string> data) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> l(mu_);
    seq = next_seq_++;
  }
  Status st = staging_->Put(seq, key, *data);
  std::lock_guard<std::mutex> l(mu_);
  if (!st.ok()) {
    if (st_.stage_errors++ == 0) {
      spdlog::warn("write-back: {}; blocks that cannot be staged are uploaded before the write returns", st.message());
    }
    return st;
  }
  auto [it, fresh] = items_.try_emplace(key);
  if (!fresh) {
    // Already staged (block keys are unique, so it holds the same bytes): keep the first.
    staging_->Remove(seq);
    return Status::OK();
  }
  Item& item = it->second;
  item.seq = seq;
  item.len = static_cast<uint32_t>(data->size());
  auto delay = opts_.delay;
  if (pack_ && item.len <= opts_.pack_below) delay = std::max<std::chrono::milliseconds>(delay, kPackWindow);
  item.ready_ns = MonoNanos() + std::chrono::duration_cast<std::chrono::nanoseconds>(delay).count();
  if (memory_ + data->size() <= opts_.memory_bytes) {
    memory_ += data->size();
    item.data = std::move(data);
  }
  queue_.push_back(key);
  slice_blocks_[SliceOf(key)]++;
  st_.staged_blocks++;
  st_.staged_bytes += item.len;
  cv_.notify_one();
  return Status::OK();
}

std::shared_ptr<const std::string> Writeback::Read(const std::string& key) {
  Staging::Entry e;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = items_.find(key);
    if (it == items_.end() || it->second.discarded) return nullptr;
    if (it->second.data) return it->second.data;
    e = Staging::Entry{it->second.seq, key, it->second.len};
  }
  auto got = staging_->Read(e);
  if (!got.ok()) {
    spdlog::error("write-back: cannot read staged block {}: {}", key, got.status().message());
    return nullptr;
  }
  return std::make_shared<const std::string>(std::move(got).value());
}

bool Writeback::HasSlice(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = slice_blocks_.find(id);
  return it != slice_blocks_.end() && it->second > 0;
}

void Writeback::Discard(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return;
  if (it->second.uploading) {
    it->second.discarded = true;  // the uploader deletes the object after it lands
    return;
  }
  queue_.erase(std::remove(queue_.begin(), queue_.end(), key), queue_.end());
  staging_->Remove(it->second.seq);
  Forget(key);
}

void Writeback::Mark(uint64_t id, bool packable) {
  std::lock_guard<std::mutex> l(mu_);
  marks_.insert(id);
  if (packable && pack_ && opts_.pack_below > 0) packable_.insert(id);
}

bool Writeback::Packable(const std::string& key, const Item& item) const {
  return pack_ && item.len <= opts_.pack_below && !item.discarded && packable_.count(SliceOf(key)) != 0;
}

std::vector<uint64_t> Writeback::TakeUploadedMarks() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<uint64_t> out;
  for (auto it = marks_.begin(); it != marks_.end();) {
    auto s = slice_blocks_.find(*it);
    if (s == slice_blocks_.end() || s->second <= 0) {
      out.push_back(*it);
      packable_.erase(*it);
      it = marks_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

WritebackStats Writeback::Drain(std::chrono::milliseconds max,
                                const std::function<void(const WritebackStats&)>& progress) {
  auto deadline = std::chrono::steady_clock::now() + max;
  std::unique_lock<std::mutex> l(mu_);
  hurry_ = true;
  cv_.notify_all();
  while (!items_.empty()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    auto step = std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::seconds(10));
    if (!idle_cv_.wait_for(l, step, [&] { return items_.empty(); }) && progress) {
      WritebackStats s = st_;
      l.unlock();
      progress(s);
      l.lock();
    }
  }
  return st_;
}

WritebackStats Writeback::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return st_;
}

void Writeback::Forget(const std::string& key) {
  auto it = items_.find(key);
  if (it == items_.end()) return;
  if (it->second.data) memory_ -= it->second.data->size();
  st_.staged_blocks--;
  st_.staged_bytes -= it->second.len;
  auto s = slice_blocks_.find(SliceOf(key));
  if (s != slice_blocks_.end() && --s->second <= 0) slice_blocks_.erase(s);
  items_.erase(it);
  idle_cv_.notify_all();
}

void Writeback::UploadLoop() {
  // This loop is the uploads' one retry policy (backoff until they land): the store makes
  // one attempt per call instead of retrying within it as well (common/io_budget.h).
  ScopedIoBudget one_attempt(IoBudget{0, 1});
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    // The queue is in staging order, so the front is the first to become ready.
    auto front = items_.find(queue_.front());
    int64_t wait_ns = front == items_.end() || hurry_ ? 0 : front->second.ready_ns - MonoNanos();
    if (wait_ns > 0) {
      cv_.wait_for(l, std::chrono::nanoseconds(wait_ns));
      continue;
    }
    std::string key = std::move(queue_.front());
    queue_.pop_front();
    auto it = items_.find(key);
    if (it == items_.end() || it->second.discarded) continue;
    it->second.uploading = true;
    if (Packable(key, it->second)) {
      // Every other ready packable block joins the pack, in staging order; the rest keep
      // their places in the queue.
      std::vector<std::string> keys{key};
      uint64_t bytes = it->second.len;
      // Blocks due within the packing window join too: small files staged one after the
      // other become ready one after the other, and would each make a pack of one.
      int64_t now = MonoNanos();
      const int64_t window_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kPackWindow).count();
      std::deque<std::string> rest;
      size_t scanned = 0;
      for (auto& k : queue_) {
        auto o = items_.find(k);
        if (o != items_.end() && scanned++ < 100000 && bytes + o->second.len <= opts_.pack_bytes &&
            (hurry_ || o->second.ready_ns <= now + window_ns) && Packable(k, o->second)) {
          o->second.uploading = true;
          bytes += o->second.len;
          keys.push_back(std::move(k));
        } else {
          rest.push_back(std::move(k));
        }
      }
      queue_.swap(rest);
      l.unlock();
      UploadPack(keys);
      l.lock();
      continue;
    }
    l.unlock();
    UploadOne(key);
    l.lock();
  }
}

std::shared_ptr<const std::string> Writeback::LoadForUpload(const std::string& key, Staging::Entry* e) {
  std::shared_ptr<const std::string> data;
  {
    std::lock_guard<std::mutex> l(mu_);
    Item& item = items_.at(key);
    data = item.data;
    *e = Staging::Entry{item.seq, key, item.len};
  }
  if (data) return data;
  auto got = staging_->Read(*e);
  if (!got.ok()) {
    // Nothing can bring it back: the slice that holds it reads as an error (EIO) on every
    // client once its staged mark goes.
    spdlog::error("write-back: staged block {} is lost: {}", key, got.status().message());
    staging_->Remove(e->seq);
    std::lock_guard<std::mutex> l(mu_);
    st_.lost++;
    Forget(key);
    return nullptr;
  }
  return std::make_shared<const std::string>(std::move(got).value());
}

void Writeback::UploadOne(const std::string& key) {
  Staging::Entry e;
  std::shared_ptr<const std::string> data = LoadForUpload(key, &e);
  if (!data) return;
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (items_.at(key).discarded) break;
    }
    Status st = put_(key, *data);
    if (st.ok()) break;
    std::unique_lock<std::mutex> l(mu_);
    st_.retries++;
    if (attempt % 10 == 0) {
      spdlog::warn("write-back: upload of staged block {} failed (try {}), retrying: {}", key, attempt + 1,
                   st.ToString());
    }
    auto pause = JitteredBackoff(attempt, opts_.backoff_base, opts_.backoff_cap);
    if (cv_.wait_for(l, pause, [&] { return stopping_; })) {
      items_.at(key).uploading = false;
      queue_.push_front(key);  // still staged: the next process uploads it
      return;
    }
  }
  bool discarded;
  {
    std::lock_guard<std::mutex> l(mu_);
    discarded = items_.at(key).discarded;
  }
  if (discarded) {
    del_(key);
  } else {
    uploaded_(key, data);
  }
  staging_->Remove(e.seq);
  std::lock_guard<std::mutex> l(mu_);
  if (!discarded) {
    st_.uploaded_blocks++;
    st_.uploaded_bytes += e.len;
  }
  Forget(key);
}

void Writeback::UploadPack(const std::vector<std::string>& keys) {
  std::vector<PackMember> members;
  std::vector<uint64_t> seqs;
  std::string data;
  for (const std::string& key : keys) {
    Staging::Entry e;
    std::shared_ptr<const std::string> block = LoadForUpload(key, &e);
    if (!block) continue;
    members.push_back(PackMember{key, SliceOf(key), static_cast<uint32_t>(data.size()), e.len});
    seqs.push_back(e.seq);
    data.append(*block);
  }
  if (members.empty()) return;
  for (int attempt = 0;; ++attempt) {
    // Members discarded meanwhile still go in: the pack's record leaves them out.
    Status st = pack_(members, data);
    if (st.ok()) break;
    std::unique_lock<std::mutex> l(mu_);
    st_.retries++;
    if (attempt % 10 == 0) {
      spdlog::warn("write-back: upload of a pack of {} staged blocks failed (try {}), retrying: {}", members.size(),
                   attempt + 1, st.ToString());
    }
    auto pause = JitteredBackoff(attempt, opts_.backoff_base, opts_.backoff_cap);
    if (cv_.wait_for(l, pause, [&] { return stopping_; })) {
      for (auto m = members.rbegin(); m != members.rend(); ++m) {
        items_.at(m->key).uploading = false;
        queue_.push_front(m->key);  // still staged: the next process uploads it
      }
      return;
    }
  }
  for (uint64_t seq : seqs) staging_->Remove(seq);
  std::lock_guard<std::mutex> l(mu_);
  st_.packs++;
  for (const PackMember& m : members) {
    if (!items_.at(m.key).discarded) {
      st_.uploaded_blocks++;
      st_.uploaded_bytes += m.len;
      st_.packed_blocks++;
    }
    Forget(m.key);
  }
}

}  // namespace tierfs
