#include "sync/store_lister.h"

#include <algorithm>
#include <cerrno>
#include <deque>
#include <future>
#include <map>
#include <vector>

#include "common/thread_pool.h"
#include "sync/read_ahead.h"

namespace tierfs::sync {
namespace {

Entry FromObject(std::string key, ObjectInfo& o) {
  Entry e;
  e.key = std::move(key);
  e.kind = e.key.back() == '/' ? Kind::kDir : Kind::kFile;
  e.size = o.size;
  e.mtime_ns = o.mtime_ns;
  e.md5 = o.etag.size() == 32 ? o.etag : "";
  return e;
}

// The keys whose full name starts with list_prefix, as keys after strip (a prefix of
// list_prefix), from start on: one flat listing.
class FlatStream : public KeyStream {
 public:
  FlatStream(ObjectStore* store, std::string strip, std::string list_prefix, std::string start)
      : store_(store), strip_(std::move(strip)), list_(std::move(list_prefix)), start_(std::move(start)) {
    // List answers keys after start_after; start is the first key wanted. A start ending
    // in '\0' is "just after" the key before it; otherwise list from a key just below
    // start and drop what sorts before it.
    std::string from;
    if (!start_.empty() && start_.back() == '\0') {
      from = strip_ + start_.substr(0, start_.size() - 1);
    } else if (!start_.empty()) {
      from = strip_ + start_;
      from.back() = static_cast<char>(from.back() - 1);
    }
    // Never before the prefix listed; below the stripped one, its marker (the prefix
    // itself, "a/") is a key: list from just below it ("a.").
    std::string floor = list_;
    if (list_.size() > strip_.size()) floor.back() = static_cast<char>(floor.back() - 1);
    after_ = std::max(from, floor);
  }

  Result<bool> Next(Entry* e) override {
    for (;;) {
      if (i_ == page_.size()) {
        if (ended_) return false;
        auto page = store_->List(list_, after_, 1000);
        if (!page.ok()) return page.status().With("list " + store_->Describe() + " after " + after_);
        page_ = std::move(page).value();
        i_ = 0;
        if (page_.empty()) {
          ended_ = true;
          return false;
        }
        after_ = page_.back().key;
      }
      ObjectInfo& o = page_[i_++];
      if (o.key.compare(0, list_.size(), list_) != 0) continue;
      std::string key = o.key.substr(strip_.size());
      if (key.empty() || key < start_) continue;
      *e = FromObject(std::move(key), o);
      return true;
    }
  }

 private:
  ObjectStore* store_;
  std::string strip_, list_, start_, after_;
  std::vector<ObjectInfo> page_;
  size_t i_ = 0;
  bool ended_ = false;
};

using Ahead = ReadAhead<KeyStream>;

constexpr size_t kAheadKeys = 1000;

class LevelStream : public KeyStream {
 public:
  LevelStream(ObjectStore* store, std::string prefix, std::string start, int threads)
      : store_(store), prefix_(std::move(prefix)), start_(std::move(start)), threads_(threads),
        pool_(std::make_unique<ThreadPool>("sync-list", threads, static_cast<size_t>(threads) * 8)) {}
  ~LevelStream() override {
    for (auto& [key, f] : ahead_) {
      if (f.valid()) f.wait();  // the threads use store_
    }
    pool_.reset();
  }

  // Whether the store lists by level (else the caller lists flat).
  Result<bool> Start() {
    auto first = store_->ListLevel(prefix_, "");
    if (!first.ok() && first.status().code() == EOPNOTSUPP) return false;
    if (!first.ok()) return first.status().With("list " + store_->Describe() + prefix_);
    Take(std::move(first).value());
    return true;
  }

  Result<bool> Next(Entry* e) override {
    for (;;) {
      if (current_) {
        if (!current_->head.empty()) {
          *e = std::move(current_->head.front());
          current_->head.pop_front();
          return true;
        }
        if (!current_->ended) {
          ASSIGN_OR_RETURN(bool more, current_->stream->Next(e));
          if (more) return true;
        }
        current_.reset();
      }
      if (items_.empty()) {
        if (token_.empty()) return false;
        auto page = store_->ListLevel(prefix_, token_);
        if (!page.ok()) return page.status().With("list " + store_->Describe() + prefix_ + " after " + token_);
        Take(std::move(page).value());
        continue;
      }
      Item it = std::move(items_.front());
      items_.pop_front();
      TopUp();
      std::string key = it.key.substr(prefix_.size());
      if (!it.is_prefix) {
        if (key.empty() || key < start_) continue;
        *e = FromObject(std::move(key), it.object);
        return true;
      }
      if (BeforeStart(key)) continue;
      auto f = ahead_.find(it.key);
      if (f == ahead_.end()) {  // not read ahead: listed now
        if (!pending_.empty() && pending_.front() == it.key) pending_.pop_front();
        current_ = std::make_unique<Ahead>();
        current_->stream = std::make_unique<FlatStream>(store_, prefix_, it.key, start_);
        continue;
      }
      Result<Ahead> got = f->second.get();
      ahead_.erase(f);
      if (!got.ok()) return got.status();
      current_ = std::make_unique<Ahead>(std::move(got).value());
    }
  }

 private:
  struct Item {
    std::string key;  // the object's key, or the prefix
    bool is_prefix = false;
    ObjectInfo object;
  };

  // Whether every key below prefix rel ("a/") sorts before start.
  bool BeforeStart(const std::string& rel) const {
    return start_ > rel && start_.compare(0, rel.size(), rel) != 0;
  }

  // Queues a page's objects and prefixes in key order.
  void Take(LevelPage page) {
    size_t o = 0, p = 0;
    while (o < page.objects.size() || p < page.prefixes.size()) {
      Item it;
      if (p == page.prefixes.size() || (o < page.objects.size() && page.objects[o].key < page.prefixes[p])) {
        it.key = page.objects[o].key;
        it.object = std::move(page.objects[o++]);
      } else {
        it.key = std::move(page.prefixes[p++]);
        it.is_prefix = true;
        pending_.push_back(it.key);
      }
      items_.push_back(std::move(it));
    }
    token_ = std::move(page.next_token);
    TopUp();
  }

  // Hands the next prefixes of the queue to the listing threads, at most 4 per thread
  // read ahead and not yet taken.
  void TopUp() {
    const size_t budget = static_cast<size_t>(threads_) * 4;
    while (!pending_.empty() && ahead_.size() < budget) {
      std::string list = std::move(pending_.front());
      pending_.pop_front();
      if (BeforeStart(list.substr(prefix_.size()))) continue;
      auto done = std::make_shared<std::promise<Result<Ahead>>>();
      ahead_.emplace(list, done->get_future());
      pool_->Submit([this, list, done] {
        done->set_value(ReadHead<KeyStream>(std::make_unique<FlatStream>(store_, prefix_, list, start_), kAheadKeys));
      });
    }
  }

  ObjectStore* store_;
  std::string prefix_, start_;
  int threads_;
  std::deque<Item> items_;            // the level's items not yet taken, in key order
  std::deque<std::string> pending_;   // its prefixes not yet handed to a listing thread
  std::string token_;       // the level's next page ("" none)
  std::unique_ptr<Ahead> current_;
  std::map<std::string, std::future<Result<Ahead>>> ahead_;  // prefix -> its first keys
  std::unique_ptr<ThreadPool> pool_;                          // last: stopped first
};

}  // namespace

std::unique_ptr<KeyStream> ListStore(ObjectStore* store, std::string prefix, std::string start, int threads) {
  if (threads > 1) {
    auto level = std::make_unique<LevelStream>(store, prefix, start, threads);
    auto by_level = level->Start();
    if (!by_level.ok()) {
      struct Failed : KeyStream {
        Status st;
        Result<bool> Next(Entry*) override { return st; }
      };
      auto f = std::make_unique<Failed>();
      f->st = by_level.status();
      return f;
    }
    if (*by_level) return level;
  }
  return std::make_unique<FlatStream>(store, prefix, prefix, std::move(start));
}

}  // namespace tierfs::sync
