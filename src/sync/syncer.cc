#include "sync/syncer.h"

#include <condition_variable>
#include <ctime>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/thread_pool.h"
#include "sync/changes.h"
#include "sync/checkpoint.h"
#include "sync/content_hash.h"
#include "sync/posix_write.h"
#include "sync/rate_limit.h"
#include "sync/temp_name.h"
#include "sync/window.h"

namespace tierfs::sync {
namespace {

constexpr size_t kMaxWindow = 100000;

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// A side with nothing to list (an incremental round with nothing changed).
class NoKeys : public KeyStream {
 public:
  Result<bool> Next(Entry*) override { return false; }
};

class Run {
 public:
  Run(Side* src, Side* dst, const SyncOptions& o, Progress* p)
      : src_(src), dst_(dst), o_(o), p_(p), limit_(o.bwlimit), now_ns_(NowNs()) {}

  Result<Counts> Go() {
    std::string start = o_.start;
    if (!o_.checkpoint.empty()) {
      std::string identity = src_->Describe() + " -> " + dst_->Describe() + " " + OptionsIdentity(o_);
      ASSIGN_OR_RETURN(cp_, Checkpoint::Open(o_.checkpoint, identity));
      const auto& st = cp_->state();
      Counts base = st.counts;
      for (const auto& [key, outcome] : st.done) {
        Counts c;
        Outcome(&c, outcome, st.done_bytes.at(key), outcome == 'd' ? 'd' : 'c');
        Window::Add(&base, c);
      }
      window_.SetBase(base);
      AddProgress(base);
      if (!st.watermark.empty() && st.watermark + std::string(1, '\0') > start) start = st.watermark + '\0';
      pending_copy_ = st.pending_copy;
      pending_delete_ = st.pending_delete;
      dirs_ = st.dirs;
      rmdirs_ = st.rmdirs;
      for (const auto& [id, link] : st.links) {
        std::promise<bool> landed;  // copied (or failed and counted) before the watermark
        landed.set_value(true);
        links_[id] = Link{link.second, landed.get_future().share(), link.first};
      }
    }
    Descend src_descend = [this](const Entry& e) { return Wanted(e, false) && ScopeOpens(e.key, src_); };
    Descend dst_descend = [this](const Entry& e) { return Wanted(e, false) && ScopeOpens(e.key, dst_); };
    std::unique_ptr<KeyStream> ss, ds;
    if (o_.scope && !ScopeOpens("", nullptr)) {  // nothing changed on the source: nothing to list
      RETURN_IF_ERROR(ScopeError());
      ss = std::make_unique<NoKeys>();
      ds = std::make_unique<NoKeys>();
    } else {
      Children children;
      if (o_.scope) children = [scope = o_.scope](const std::string& dir) { return scope->Children(dir); };
      ASSIGN_OR_RETURN(ss, src_->List(start, src_descend, children));
      ASSIGN_OR_RETURN(ds, dst_->List(start, dst_descend, children));
    }
    pool_ = std::make_unique<ThreadPool>("sync", o_.threads, static_cast<size_t>(o_.threads) * 4);
    Status merged = Merge(ss.get(), ds.get());
    if (!merged.ok()) aborting_ = true;
    WaitIdle();
    pool_.reset();
    if (!merged.ok()) return merged;
    if (cp_) RETURN_IF_ERROR(cp_->status());
    Counts total = window_.Total();
    for (const std::string& key : pending_delete_) {  // deleted by the killed run, gone since
      (void)key;
      total.deleted++;
      p_->deleted++;
    }
    Finish(&total);
    if (cp_) RETURN_IF_ERROR(cp_->Finish());
    return total;
  }

 private:
  struct Link {
    std::string first_key;
    std::shared_future<bool> copied;  // the first name's copy landed (true) or failed
    uint64_t dst_ino = 0;             // the first name's inode on the destination, when known
  };

  // ---------------------------------------------------------------- listing and selection

  bool InFilesFrom(const std::string& path, bool is_dir) const {
    if (!o_.have_files_from) return true;
    if (o_.files_from.count(path)) return true;
    // Below a listed directory, or a directory on the way to a listed path.
    for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1)) {
      if (o_.files_from.count(path.substr(0, i))) return true;
    }
    if (is_dir) {
      auto it = o_.files_from.lower_bound(path + "/");
      return it != o_.files_from.end() && it->compare(0, path.size() + 1, path + "/") == 0;
    }
    return false;
  }

  // Filters and --files-from; parents_walked: the side walked the key's directories (only
  // those wanted), so they need no check.
  bool Wanted(const Entry& e, bool object_store) const {
    std::string path = TrimKey(e.key);
    if (!InFilesFrom(path, e.is_dir())) return false;
    return object_store ? o_.filter.IncludedWithParents(e.key) : o_.filter.Included(path, e.is_dir());
  }

  // Incremental rounds: whether directory dir is listed. An error stops the merge at the
  // next key (NextOf), before the other side's entries below dir are decided.
  bool ScopeOpens(const std::string& dir, Side* listed_on) {
    if (!o_.scope) return true;
    auto open = o_.scope->Opens(dir, listed_on);
    if (open.ok()) return *open;
    std::lock_guard<std::mutex> l(scope_mu_);
    if (scope_error_.ok()) scope_error_ = open.status();
    return false;
  }

  Status ScopeError() {
    std::lock_guard<std::mutex> l(scope_mu_);
    return scope_error_;
  }

  bool BeyondEnd(const std::string& key) const { return !o_.end.empty() && key > o_.end; }

  // The next key of a side worth merging; false at the end.
  Result<bool> NextOf(KeyStream* s, Side* side, bool is_src, Entry* e, std::string* last) {
    for (;;) {
      ASSIGN_OR_RETURN(bool more, s->Next(e));
      RETURN_IF_ERROR(ScopeError());
      if (!more || BeyondEnd(e->key)) return false;
      if (!last->empty() && e->key <= *last) {
        return Status::Err(EIO, "the listing of " + side->Describe() + " is out of order ('" + e->key +
                                    "' after '" + *last + "'); stopping before anything is deleted");
      }
      *last = e->key;
      if (is_src) p_->listed++;
      if (IsTempName(e->key)) {
        if (!is_src && !o_.dry_run) Submit([this, e = *e] { (void)dst_->Remove(e); });  // a killed run's leftover
        continue;
      }
      if (!Wanted(*e, !side->posix())) continue;
      // A POSIX side walked only the directories the scope opens (Descend), so only its
      // top-level keys need the check; an object store's flat listing needs it for each key.
      if (o_.scope && (!side->posix() || ParentKey(e->key).empty())) {
        ASSIGN_OR_RETURN(bool covered, o_.scope->Covers(e->key));
        if (!covered) continue;
      }
      if (is_src && e->kind == Kind::kSymlink && !o_.links) continue;
      return true;
    }
  }

  bool SizeAgeOk(const Entry& e) const {
    if (e.kind != Kind::kFile) return true;
    if (o_.min_size >= 0 && e.size < static_cast<uint64_t>(o_.min_size)) return false;
    if (o_.max_size >= 0 && e.size > static_cast<uint64_t>(o_.max_size)) return false;
    double age = static_cast<double>(now_ns_ - e.mtime_ns) / 1e9;
    if (o_.min_age >= 0 && age < o_.min_age) return false;
    if (o_.max_age >= 0 && age > o_.max_age) return false;
    return true;
  }

  Status Merge(KeyStream* ss, KeyStream* ds) {
    Entry s, d;
    std::string s_last, d_last;
    ASSIGN_OR_RETURN(bool have_s, NextOf(ss, src_, true, &s, &s_last));
    ASSIGN_OR_RETURN(bool have_d, NextOf(ds, dst_, false, &d, &d_last));
    while (have_s || have_d) {
      if (cp_) RETURN_IF_ERROR(cp_->status());
      if (have_d && (!have_s || d.key < s.key)) {
        DstOnly(d);
        ASSIGN_OR_RETURN(have_d, NextOf(ds, dst_, false, &d, &d_last));
      } else if (have_s && (!have_d || s.key < d.key)) {
        if (SizeAgeOk(s)) SrcOnly(s);
        ASSIGN_OR_RETURN(have_s, NextOf(ss, src_, true, &s, &s_last));
      } else {
        if (SizeAgeOk(s)) Both(s, d);
        ASSIGN_OR_RETURN(have_s, NextOf(ss, src_, true, &s, &s_last));
        ASSIGN_OR_RETURN(have_d, NextOf(ds, dst_, false, &d, &d_last));
      }
    }
    return Status::OK();
  }

  // ---------------------------------------------------------------- decisions

  // Directories count as keys only where they are objects of their own: with --dirs.
  bool CountsDir() const { return o_.dirs; }

  void DstOnly(const Entry& d) {
    bool was_pending = pending_delete_.erase(d.key) > 0;
    if (!o_.delete_dst) return;
    if (d.is_dir()) {
      if (!dst_->posix() && !o_.dirs) return;
      if (!o_.dry_run) {
        rmdirs_.push_back(d.key);
        if (cp_) cp_->Rmdir(d.key);
      } else {
        Report("delete", d.key, "");
      }
      return;
    }
    (void)was_pending;
    uint64_t seq = window_.Open(d.key);
    if (o_.dry_run) {
      Report("delete", d.key, "");
      Counts c;
      c.deleted = 1;
      Done(seq, c);
      return;
    }
    if (cp_) cp_->Begin('d', d.key);
    Submit([this, seq, d] {
      Counts c;
      Status st = dst_->Remove(d);
      if (st.ok()) {
        c.deleted = 1;
      } else {
        c.failed = 1;
        Report("failed", d.key, st.ToString());
      }
      if (cp_) cp_->End('d', st.ok() ? 'd' : 'f', 0, d.key);
      Done(seq, c);
    });
  }

  void SrcOnly(const Entry& s) {
    if (s.is_dir() && !dst_->posix() && !o_.dirs) return;  // a prefix of keys, nothing of its own
    if (dst_->posix()) MarkUsed(s);
    if (Settled(s.key)) return;
    uint64_t seq = window_.Open(s.key);
    Counts c;
    if (!s.is_dir() || CountsDir()) c.found = 1;
    if (o_.existing) {
      if (c.found) c.skipped = 1;
      Done(seq, c);
      return;
    }
    if (s.is_dir()) {
      if (dst_->posix()) NoteDir(s);
      if (!o_.dirs) {
        Done(seq, c);
        return;
      }
      if (o_.dry_run) {
        Report("mkdir", s.key, "");
      } else {
        if (cp_) cp_->Begin('c', s.key);  // journaled as copies are, so a resumed run counts it once
        Status st = dst_->Mkdir(s);
        if (!st.ok()) {
          c.failed = 1;
          Report("failed", s.key, st.ToString());
          if (cp_) cp_->End('c', 'f', 0, s.key);
          Done(seq, c);
          return;
        }
        if (o_.xattrs) CopyXattrs(s);
        if (cp_) cp_->End('c', 'c', 0, s.key);
      }
      c.copied = 1;
      Done(seq, c);
      return;
    }
    Copy(seq, s, nullptr, c, JoinGroup(s, nullptr, false));
  }

  void Both(const Entry& s, const Entry& d) {
    if (s.is_dir() && !dst_->posix() && !o_.dirs) return;
    if (dst_->posix()) MarkUsed(s);
    if (Settled(s.key)) return;
    uint64_t seq = window_.Open(s.key);
    Counts c;
    if (!s.is_dir() || CountsDir()) c.found = 1;
    if (s.is_dir()) {
      if (dst_->posix()) NoteDir(s);
      bool made_by_killed_run = pending_copy_.erase(s.key) > 0;
      if (c.found) (made_by_killed_run ? c.copied : c.skipped) = 1;
      Done(seq, c);
      return;
    }
    bool pending = pending_copy_.erase(s.key) > 0;
    int verdict = Decide(s, d);  // 0 skip, 1 copy, 2 compare contents first
    Group g = JoinGroup(s, &d, verdict == 0);
    if (g.later) verdict = d.ino != 0 && d.ino == g.first_dst_ino ? 0 : 1;
    if (verdict == 0) {
      if (pending) {  // the killed run copied it
        c.copied = 1;
        c.bytes = s.kind == Kind::kFile ? s.size : 0;
      } else {
        c.skipped = 1;
      }
      if (o_.perms && dst_->posix() && src_->posix() && !o_.dry_run &&
          (s.mode != d.mode || s.uid != d.uid || s.gid != d.gid)) {
        Submit([this, seq, s, c] {
          Counts cc = c;
          Status st = dst_->SetAttrs(s, true);
          if (!st.ok()) Fail(&cc, s.key, st);
          Done(seq, cc);
        });
        return;
      }
      if (o_.delete_src && !o_.dry_run) {
        Submit([this, seq, s, d, c] {
          Counts cc = c;
          DeleteSource(s, d, &cc);
          Done(seq, cc);
        });
        return;
      }
      Done(seq, c);
      return;
    }
    Copy(seq, s, &d, c, g, verdict == 2, pending);
  }

  int Decide(const Entry& s, const Entry& d) const {
    if (s.kind != d.kind) return 1;
    if (o_.force) return 1;
    if (o_.ignore_existing) return 0;
    int64_t prec = std::max(src_->mtime_precision_ns(), dst_->mtime_precision_ns());
    int64_t st = s.mtime_ns / prec, dt = d.mtime_ns / prec;
    if (o_.update && dt > st) return 0;
    if (s.kind == Kind::kSymlink) return s.target == d.target && (!o_.perms || dt == st) ? 0 : 1;
    if (s.size != d.size) return 1;
    if (o_.checksum || o_.check_all) return 2;
    bool same_time = dst_->mtime_is_write_time() ? dt >= st : st == dt;
    return same_time ? 0 : 1;
  }

  // --hard-links: the first name of a group of hard links is copied as any file; later
  // names become links to its copy (unless the destination already has them linked).
  struct Group {
    bool later = false;          // a later name: link to first_key
    std::string first_key;
    std::shared_future<bool> first_landed;
    uint64_t first_dst_ino = 0;  // the first name's inode on the destination, 0 unknown
    std::shared_ptr<std::promise<bool>> landed;  // the first name: set when its copy ends
  };

  Group JoinGroup(const Entry& s, const Entry* d, bool first_unchanged) {
    Group g;
    if (!o_.hard_links || s.nlink < 2 || s.kind != Kind::kFile || !src_->posix() || !dst_->posix()) return g;
    std::string id = std::to_string(s.dev) + ":" + std::to_string(s.ino);
    auto it = links_.find(id);
    if (it != links_.end() && it->second.first_key != s.key) {  // (the same key: a resumed run's first name)
      g.later = true;
      g.first_key = it->second.first_key;
      g.first_landed = it->second.copied;
      g.first_dst_ino = it->second.dst_ino;
      return g;
    }
    Link l;
    l.first_key = s.key;
    auto p = std::make_shared<std::promise<bool>>();
    l.copied = p->get_future().share();
    if (first_unchanged || o_.dry_run) {
      l.dst_ino = d ? d->ino : 0;
      p->set_value(true);
    } else {
      g.landed = p;
    }
    bool known = it != links_.end();
    links_[id] = l;
    if (cp_ && !known) cp_->Link(id, l.dst_ino, s.key);
    return g;
  }

  // A key the killed run finished (counted from the checkpoint).
  bool Settled(const std::string& key) {
    if (!cp_) return false;
    return cp_->state().done.count(key) > 0;
  }

  // A source directory whose attributes are set at the end. Without --dirs only once a
  // file below it passes (MarkUsed), as rsync -m prunes directories with no file.
  void NoteDir(const Entry& s) {
    if (o_.dry_run) return;
    PopOpenDirs(s.key);
    DirAttr a{s.key, s.mtime_ns, s.mode, s.uid, s.gid, o_.dirs};
    open_dirs_.push_back(dirs_.size());
    dirs_.push_back(a);
    if (cp_ && a.used) cp_->Dir(a);
  }

  void PopOpenDirs(const std::string& key) {
    while (!open_dirs_.empty()) {
      const std::string& top = dirs_[open_dirs_.back()].key;
      if (key.compare(0, top.size(), top) == 0) break;
      open_dirs_.pop_back();
    }
  }

  void MarkUsed(const Entry& s) {
    if (o_.dirs || o_.dry_run || s.is_dir()) return;
    PopOpenDirs(s.key);
    for (auto it = open_dirs_.rbegin(); it != open_dirs_.rend(); ++it) {
      DirAttr& d = dirs_[*it];
      if (d.used) break;  // and so are its parents
      d.used = true;
      if (cp_) cp_->Dir(d);
    }
  }

  // ---------------------------------------------------------------- carrying out

  void Copy(uint64_t seq, const Entry& s, const Entry* d, Counts c, const Group& g, bool compare_first = false,
            bool pending = false) {
    std::shared_ptr<std::promise<bool>> landed = g.landed;
    std::shared_future<bool> first_landed = g.first_landed;
    std::string first_key = g.later ? g.first_key : "";
    if (o_.dry_run) {
      Report(first_key.empty() ? "copy" : "link", s.key, first_key);
      c.copied = 1;
      c.bytes = first_key.empty() && s.kind == Kind::kFile ? s.size : 0;
      if (landed) landed->set_value(true);
      Done(seq, c);
      return;
    }
    if (cp_) cp_->Begin('c', s.key);
    if (!first_key.empty() || !compare_first) p_->pending_bytes += s.size;
    std::optional<Entry> dst_entry;
    if (d) dst_entry = *d;
    Submit([this, seq, s, dst_entry, c, compare_first, pending, landed, first_landed, first_key]() mutable {
      Status st;
      bool copied = false;
      if (!first_key.empty()) {
        bool ok = first_landed.valid() && first_landed.get();
        st = ok ? dst_->Link(first_key, s.key)
                : Status::Err(EIO, "not linked: the copy of its first name " + first_key + " failed");
        copied = st.ok();
      } else {
        bool needed = true;
        if (compare_first) {
          auto a = ContentMd5(src_, s);
          auto b = a.ok() ? ContentMd5(dst_, *dst_entry) : a;
          if (!b.ok()) {
            st = b.status();
          } else {
            c.checked += o_.check_all ? 1 : 0;
            needed = *a != *b;
            if (needed) p_->pending_bytes += s.size;
          }
        }
        if (st.ok() && needed) {
          st = CopyData(s);
          copied = st.ok();
          if (st.ok() && o_.check_new) {
            st = Verify(s);
            c.checked++;
          }
        }
        if (st.ok() && !needed && pending) copied = true;  // the killed run copied it
        if (st.ok() && !needed && dst_->posix() && dst_entry &&
            (dst_entry->mtime_ns != s.mtime_ns ||
             (o_.perms && (dst_entry->mode != s.mode || dst_entry->uid != s.uid || dst_entry->gid != s.gid)))) {
          st = dst_->SetAttrs(s, o_.perms && src_->posix());  // same content: rsync -c still sets the time
        }
        if (landed) landed->set_value(st.ok());
      }
      if (!st.ok()) {
        Fail(&c, s.key, st);
      } else if (copied) {
        c.copied = 1;
        c.bytes = first_key.empty() && s.kind == Kind::kFile ? s.size : 0;
        if (o_.delete_src) DeleteSource(s, Entry{}, &c);
      } else {
        c.skipped = 1;
        if (o_.delete_src && dst_entry) DeleteSource(s, *dst_entry, &c);
      }
      if (cp_) cp_->End('c', st.ok() ? 'c' : 'f', c.bytes, s.key);
      Done(seq, c);
    });
  }

  Status CopyData(const Entry& s) {
    Status st = CopyOnce(s);
    if ((st.code() == EISDIR || st.code() == ENOTEMPTY || st.code() == EEXIST) && o_.delete_dst && dst_->posix()) {
      // A directory of the destination holds the name (its keys, after this one, are
      // deletions the merge has not reached): removed, and the copy made again.
      RETURN_IF_ERROR(dst_->RemoveAll(s.key));
      st = CopyOnce(s);
    }
    RETURN_IF_ERROR(st);
    if (o_.xattrs && s.kind == Kind::kFile) CopyXattrs(s);
    return Status::OK();
  }

  Status CopyOnce(const Entry& s) {
    if (s.kind == Kind::kSymlink) {
      if (!dst_->posix()) return Status::Err(EOPNOTSUPP, "a symlink cannot be copied to " + dst_->Describe());
      return dst_->Symlink(s, o_.perms);
    }
    ASSIGN_OR_RETURN(auto reader, src_->Open(s));
    Source source;
    source.reader = reader.get();
    source.size = s.size;
    source.on_bytes = [this](const char*, size_t n) {
      limit_.Take(n);
      p_->bytes += n;
      uint64_t pb = p_->pending_bytes.load();
      p_->pending_bytes -= std::min<uint64_t>(pb, n);
    };
    return dst_->Put(s, source, o_.perms && src_->posix());
  }

  void CopyXattrs(const Entry& s) {
    if (!src_->posix() || !dst_->posix()) return;
    auto x = src_->Xattrs(s);
    Status st = x.ok() ? dst_->SetXattrs(s, *x) : x.status();
    if (!st.ok()) Report("warning", s.key, st.ToString());
  }

  // Reads back what was written and compares it with the source.
  Status Verify(const Entry& s) {
    if (s.kind != Kind::kFile) return Status::OK();
    ASSIGN_OR_RETURN(std::string a, ContentMd5(src_, s));
    Entry written = s;
    written.md5.clear();
    ASSIGN_OR_RETURN(std::string b, ContentMd5(dst_, written));
    if (a != b) return Status::Err(EIO, "the copy differs from the source after it was written (MD5 " + b + ", source " + a + ")");
    return Status::OK();
  }

  // --delete-src: removes the source key once the destination is verified to hold the same
  // bytes (re-read when it was just written).
  void DeleteSource(const Entry& s, const Entry& d, Counts* c) {
    Status st = Status::OK();
    if (s.kind == Kind::kFile) {
      auto a = ContentMd5(src_, s);
      Entry dd = d.key.empty() ? s : d;
      if (d.key.empty()) dd.md5.clear();
      auto b = a.ok() ? ContentMd5(dst_, dd) : a;
      if (!b.ok()) {
        st = b.status();
      } else if (*a != *b) {
        st = Status::Err(EIO, "kept in the source: the destination's content differs");
      }
    }
    if (st.ok()) st = src_->Remove(s);
    if (st.ok()) {
      c->deleted++;
    } else {
      Report("warning", s.key, "not deleted from the source: " + st.ToString());
    }
  }

  void Fail(Counts* c, const std::string& key, const Status& st) {
    c->failed = 1;
    c->copied = 0;
    c->skipped = 0;
    c->bytes = 0;
    Report("failed", key, st.ToString());
  }

  static void Outcome(Counts* c, char outcome, uint64_t bytes, char op) {
    if (op != 'd') c->found = 1;
    if (outcome == 'c') {
      c->copied = 1;
      c->bytes = bytes;
    } else if (outcome == 'd') {
      c->deleted = 1;
    } else if (outcome == 'f') {
      c->failed = 1;
    }
  }

  void Done(uint64_t seq, const Counts& c) {
    AddProgress(c);
    window_.Close(seq, c, [&](const std::string& key, const Counts& total) {
      if (cp_ && ++since_advance_ >= 1000) {  // under the window's lock
        since_advance_ = 0;
        cp_->Advance(key, total);
      }
    });
  }

  void AddProgress(const Counts& c) {
    p_->found += c.found;
    p_->copied += c.copied;
    p_->skipped += c.skipped;
    p_->deleted += c.deleted;
    p_->failed += c.failed;
  }

  void Submit(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> l(idle_mu_);
      ++in_flight_;
    }
    pool_->Submit([this, fn = std::move(fn)] {
      if (!aborting_.load()) fn();  // after a fatal error, what is queued is dropped
      std::lock_guard<std::mutex> l(idle_mu_);
      if (--in_flight_ == 0) idle_.notify_all();
    });
  }

  void WaitIdle() {
    std::unique_lock<std::mutex> l(idle_mu_);
    idle_.wait(l, [&] { return in_flight_ == 0; });
  }

  void Report(const std::string& what, const std::string& key, const std::string& detail) {
    if (o_.report) o_.report(what, key, detail);
  }

  // The directories --delete-dst removes (children first), then directory times and modes
  // (children first): removing a directory changes its parent's time, so times come last.
  void Finish(Counts* total) {
    if (o_.dry_run) return;
    for (auto it = rmdirs_.rbegin(); it != rmdirs_.rend(); ++it) {
      Entry e;
      e.key = *it;
      e.kind = Kind::kDir;
      Status st = dst_->Remove(e);
      if (st.ok()) {
        if (CountsDir()) {
          total->deleted++;
          p_->deleted++;
        }
      } else {
        Report("warning", e.key, "not removed: " + st.ToString());
      }
    }
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      if (!it->used) continue;
      Entry e;
      e.key = it->key;
      e.kind = Kind::kDir;
      e.mtime_ns = it->mtime_ns;
      e.mode = it->mode;
      e.uid = it->uid;
      e.gid = it->gid;
      Status st = dst_->SetAttrs(e, o_.perms && src_->posix());
      if (!st.ok() && st.code() != ENOENT) Report("warning", e.key, st.ToString());
    }
    Status flushed = dst_->Flush();
    if (!flushed.ok()) Report("warning", "", flushed.ToString());
  }

  Side* src_;
  Side* dst_;
  const SyncOptions& o_;
  Progress* p_;
  RateLimit limit_;
  int64_t now_ns_;
  std::unique_ptr<Checkpoint> cp_;
  std::unique_ptr<ThreadPool> pool_;
  Window window_{kMaxWindow};
  uint64_t since_advance_ = 0;
  std::set<std::string> pending_copy_, pending_delete_;
  std::vector<DirAttr> dirs_;
  std::vector<size_t> open_dirs_;  // dirs_ indexes of the directories on the current key's path
  std::vector<std::string> rmdirs_;
  std::map<std::string, Link> links_;  // "DEV:INO" of the source -> the group's first name
  std::atomic<bool> aborting_{false};
  std::mutex scope_mu_;
  Status scope_error_;  // guarded by scope_mu_
  std::mutex idle_mu_;
  std::condition_variable idle_;
  uint64_t in_flight_ = 0;
};

}  // namespace

Result<Counts> RunSync(Side* src, Side* dst, const SyncOptions& options, Progress* progress) {
  Progress local;
  Run run(src, dst, options, progress ? progress : &local);
  return run.Go();
}

std::string OptionsIdentity(const SyncOptions& o) {
  std::ostringstream s;
  s << "u" << o.update << "i" << o.ignore_existing << "e" << o.existing << "f" << o.force << "c" << o.checksum << "d"
    << o.dirs << "p" << o.perms << "l" << o.links << "h" << o.hard_links << "x" << o.xattrs << "D" << o.delete_dst
    << o.delete_src << " " << o.start << ".." << o.end << " size " << o.min_size << ".." << o.max_size << " age "
    << o.min_age << ".." << o.max_age << "\n"
    << o.filter.Describe();
  if (o.have_files_from) {
    std::hash<std::string> h;
    size_t mix = 0;
    for (const std::string& p : o.files_from) mix = mix * 1000003 ^ h(p);
    s << "files-from " << o.files_from.size() << " " << mix;
  }
  return s.str();
}

}  // namespace tierfs::sync
