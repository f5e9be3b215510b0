#include "sync/tree_lister.h"

#include <optional>
#include <queue>
#include <vector>

namespace tierfs::sync {
namespace {

// A min-heap by key: the name with its '/', so that directory "a.txt" ("a.txt/") comes
// before directory "a" ("a/"), as it does in byte order of keys ('.' < '/').
struct DirLater {
  bool operator()(const Entry& a, const Entry& b) const { return a.key + "/" > b.key + "/"; }
};

struct Frame {
  std::string dir_key;
  std::unique_ptr<DirStream> stream;
  std::optional<Entry> next;  // the stream's next file, read ahead
  bool ended = false;
  std::priority_queue<Entry, std::vector<Entry>, DirLater> dirs;  // held back, names without '/'
};

class TreeStream : public KeyStream {
 public:
  TreeStream(OpenDir open, std::string start, Descend descend)
      : open_(std::move(open)), start_(std::move(start)), descend_(std::move(descend)) {}

  Result<bool> Next(Entry* e) override {
    if (!started_) {
      started_ = true;
      RETURN_IF_ERROR(Push(""));
    }
    while (!stack_.empty()) {
      Frame& f = stack_.back();
      // Read ahead to the next file, holding directories back.
      while (!f.next && !f.ended) {
        Entry c;
        ASSIGN_OR_RETURN(bool more, f.stream->Next(&c));
        if (!more) {
          f.ended = true;
        } else if (c.is_dir()) {
          f.dirs.push(std::move(c));
        } else {
          f.next = std::move(c);
        }
      }
      bool dir_first = !f.dirs.empty() && (!f.next || f.dirs.top().key + "/" < f.next->key);
      if (dir_first) {
        Entry d = f.dirs.top();
        f.dirs.pop();
        d.key = f.dir_key + d.key + "/";
        bool wanted = d.key >= start_;
        if ((wanted || start_.compare(0, d.key.size(), d.key) == 0) && (!descend_ || descend_(d))) {
          RETURN_IF_ERROR(Push(d.key));
        }
        if (wanted) {
          *e = std::move(d);
          return true;
        }
        continue;
      }
      if (f.next) {
        Entry c = std::move(*f.next);
        f.next.reset();
        c.key = f.dir_key + c.key;
        if (c.key >= start_) {
          *e = std::move(c);
          return true;
        }
        continue;
      }
      stack_.pop_back();
    }
    return false;
  }

 private:
  Status Push(const std::string& dir_key) {
    auto s = open_(dir_key);
    if (!s.ok()) return s.status();
    Frame f;
    f.dir_key = dir_key;
    f.stream = std::move(s).value();
    stack_.push_back(std::move(f));
    return Status::OK();
  }

  OpenDir open_;
  std::string start_;
  Descend descend_;
  bool started_ = false;
  std::vector<Frame> stack_;
};

}  // namespace

std::unique_ptr<KeyStream> ListTree(OpenDir open, std::string start, Descend descend) {
  return std::make_unique<TreeStream>(std::move(open), std::move(start), std::move(descend));
}

}  // namespace tierfs::sync
