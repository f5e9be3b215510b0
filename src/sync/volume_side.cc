#include "sync/volume_side.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/meta.h"
#include "sync/posix_write.h"
#include "sync/temp_name.h"
#include "sync/tree_lister.h"
#include "vfs/vfs.h"

namespace tierfs::sync {
namespace {

constexpr size_t kPage = 1000;
// More changed entries than this in one round: a full round costs less than their lookups.
constexpr size_t kMaxChanges = 2000000;

Entry FromAttr(const std::string& name, const Attr& a) {
  Entry e;
  e.key = name;
  uint32_t type = a.mode & S_IFMT;
  e.kind = type == S_IFDIR ? Kind::kDir : type == S_IFLNK ? Kind::kSymlink : Kind::kFile;
  e.size = e.kind == Kind::kDir ? 0 : a.length;
  e.mtime_ns = a.mtime_ns;
  e.mode = a.mode & 07777;
  e.uid = a.uid;
  e.gid = a.gid;
  e.nlink = e.kind == Kind::kDir ? 1 : a.nlink;
  return e;
}

class VolumeSide;

// Entries the change log named, looked up before the listing (VolumeSide::Changed): key ->
// the entry (ino 0: absent). Read-only once made; a write to the side drops it.
using Primed = std::unordered_map<std::string, Meta::NameLookup>;
constexpr size_t kMaxPrimed = 65536;  // about 13 MiB
using Entries = std::map<std::pair<Ino, std::string>, Ino>;  // (parent, name) -> inode named (0: none)

// Entries listed by a VolumeSide carry its tag as their dev (hard links are matched by dev
// and inode within one side): Open then reads the inode it listed, with no lookup, and an
// entry from another side (Verify's copy of the source's) is looked up by name.
uint64_t NewDevTag() {
  static std::atomic<uint64_t> n{0};
  return (uint64_t{0x7ffe} << 48) | ++n;
}

// A directory's entries, a page at a time; or only those named (sorted), from `primed` when
// it holds them, else looked up kPage names per transaction.
class PageStream : public DirStream {
 public:
  PageStream(Meta* meta, Ino dir, std::string dir_key, std::string shown, NameList names, uint64_t dev,
             std::shared_ptr<const Primed> primed)
      : meta_(meta), dir_(dir), dir_key_(TrimKey(dir_key)), shown_(std::move(shown)), names_(std::move(names)),
        dev_(dev), primed_(std::move(primed)) {}
  Result<bool> Next(Entry* e) override {
    for (;;) {
      if (names_ && i_ == page_.size()) {
        page_.clear();
        i_ = 0;
        while (page_.empty() && n_ < names_->size()) RETURN_IF_ERROR(LookUpNames());
        if (page_.empty()) return false;
      }
      if (i_ == page_.size()) {
        if (ended_) return false;
        bool more = false;
        auto page = meta_->ReaddirPage(Ctx::Root(), dir_, from_, kPage, true, &more);
        if (!page.ok()) return page.status().With("list " + shown_);
        page_ = std::move(page).value();
        i_ = 0;
        ended_ = !more;
        if (page_.empty()) {
          ended_ = true;
          return false;
        }
        from_ = page_.back().name + std::string(1, '\0');
      }
      DirEntry& d = page_[i_++];
      if (d.attr.mode == 0) continue;  // damaged or removed meanwhile (logged by Meta)
      *e = FromAttr(d.name, d.attr);
      e->dev = dev_;
      e->ino = d.ino;
      if (e->kind == Kind::kSymlink) {
        auto t = meta_->Readlink(d.ino);
        if (!t.ok()) return t.status().With("read symlink " + shown_ + d.name);
        e->target = *t;
      } else if ((d.type & S_IFMT) != S_IFREG && e->kind == Kind::kFile) {
        continue;  // devices, FIFOs, sockets
      }
      return true;
    }
  }

 private:
  // The next kPage names into page_ (those that exist, in name order).
  Status LookUpNames() {
    size_t end = std::min(names_->size(), n_ + kPage);
    std::vector<const Meta::NameLookup*> got(end - n_);  // each name's entry: primed, or in ask
    std::vector<Meta::NameLookup> ask;
    ask.reserve(end - n_);  // got points into it
    for (size_t k = n_; k < end; ++k) {
      const std::string& name = (*names_)[k];
      auto it = primed_ ? primed_->find(dir_key_.empty() ? name : dir_key_ + "/" + name) : Primed::const_iterator();
      if (primed_ && it != primed_->end() && it->second.parent == dir_) {
        got[k - n_] = &it->second;
      } else {
        ask.emplace_back(dir_, name);
        got[k - n_] = &ask.back();
      }
    }
    Status st = meta_->LookupMany(Ctx::Root(), ask.data(), ask.size());
    if (!st.ok()) return st.With("look up names in " + shown_);
    for (size_t k = n_; k < end; ++k) {
      const Meta::NameLookup& item = *got[k - n_];
      if (item.ino == 0) continue;
      DirEntry d;
      d.name = (*names_)[k];
      d.ino = item.ino;
      d.attr = item.attr;
      d.type = item.attr.mode & S_IFMT;
      page_.push_back(std::move(d));
    }
    n_ = end;
    return Status::OK();
  }

  Meta* meta_;
  Ino dir_;
  std::string dir_key_, shown_, from_;
  NameList names_;
  uint64_t dev_;
  std::shared_ptr<const Primed> primed_;
  size_t n_ = 0;  // names_ looked up
  std::vector<DirEntry> page_;
  size_t i_ = 0;
  bool ended_ = false;
};

class VfsReader : public Reader {
 public:
  VfsReader(Vfs* vfs, uint64_t fh, std::string shown) : vfs_(vfs), fh_(fh), shown_(std::move(shown)) {}
  ~VfsReader() override { vfs_->Release(fh_).ok(); }
  Result<size_t> Read(uint64_t off, char* buf, size_t n) override {
    size_t got = 0;
    while (got < n) {
      auto r = vfs_->Read(fh_, off + got, n - got, buf + got);
      if (!r.ok()) return r.status().With("read " + shown_);
      if (*r == 0) break;
      got += *r;
    }
    return got;
  }

 private:
  Vfs* vfs_;
  uint64_t fh_;
  std::string shown_;
};

class VolumeSide : public Side, public ChangeFeed {
 public:
  VolumeSide(std::unique_ptr<client::Volume> v, Ino base, std::string shown)
      : v_(std::move(v)), base_(base), shown_(std::move(shown)) {}
  ~VolumeSide() override { v_->Close(); }

  std::string Describe() const override { return shown_; }
  bool posix() const override { return true; }
  int64_t mtime_precision_ns() const override { return 1; }

  Result<std::unique_ptr<KeyStream>> List(const std::string& start, const Descend& descend,
                                          const Children& children = nullptr) override {
    return ListTree(
        [this](const std::string& dir_key, const NameList& names) -> Result<std::unique_ptr<DirStream>> {
          ASSIGN_OR_RETURN(Ino dir, Resolve(TrimKey(dir_key), false));
          return std::unique_ptr<DirStream>(
              new PageStream(v_->meta(), dir, dir_key, shown_ + "/" + dir_key, names, dev_, GetPrimed()));
        },
        start, descend, list_threads_, children);
  }

  Result<std::unique_ptr<Reader>> Open(const Entry& e) override {
    Ino ino = e.dev == dev_ ? e.ino : 0;  // listed here: the inode listed
    if (ino == 0) {
      ASSIGN_OR_RETURN(ino, Resolve(e.key, false));
    }
    auto fh = v_->vfs()->Open(Ctx::Root(), ino, O_RDONLY);
    if (!fh.ok()) return fh.status().With("open " + Shown(e.key));
    return std::unique_ptr<Reader>(new VfsReader(v_->vfs(), fh->fh, Shown(e.key)));
  }

  Status Put(const Entry& e, Source& src, bool perms) override {
    DropPrimed();
    ASSIGN_OR_RETURN(Ino dir, Resolve(ParentKey(e.key), true));
    Vfs* vfs = v_->vfs();
    std::string tmp = TempNameFor(BaseName(e.key));
    auto made = vfs->Create(Ctx::Root(), dir, tmp, 0600, O_RDWR | O_EXCL);
    if (!made.ok()) return made.status().With("create " + Shown(ParentKey(e.key) + "/" + tmp));
    uint64_t fh = made->second.fh;
    Ino ino = made->first.ino;
    Status st = WriteAll(fh, src, Shown(e.key));
    if (st.ok()) st = vfs->Flush(fh, 0);
    if (st.ok()) st = SetInode(ino, e, perms ? e.mode : DefaultMode(e), perms, fh);
    Status released = vfs->Release(fh);
    if (st.ok()) st = released;
    if (st.ok()) st = vfs->Rename(Ctx::Root(), dir, tmp, dir, BaseName(e.key), 0);
    if (!st.ok()) {
      vfs->Unlink(Ctx::Root(), dir, tmp).ok();
      return st.With("write " + Shown(e.key));
    }
    return Status::OK();
  }

  Status Mkdir(const Entry& e) override {
    DropPrimed();
    return Resolve(e.key, true).status();
  }

  Status Symlink(const Entry& e, bool perms) override {
    DropPrimed();
    ASSIGN_OR_RETURN(Ino dir, Resolve(ParentKey(e.key), true));
    std::string tmp = TempNameFor(BaseName(e.key));
    auto made = v_->vfs()->Symlink(Ctx::Root(), dir, tmp, e.target);
    if (!made.ok()) return made.status().With("symlink " + Shown(e.key));
    Status st = SetInode(made->ino, e, 0, perms, 0);
    if (st.ok()) st = v_->vfs()->Rename(Ctx::Root(), dir, tmp, dir, BaseName(e.key), 0);
    if (!st.ok()) v_->vfs()->Unlink(Ctx::Root(), dir, tmp).ok();
    return st;
  }

  Status Link(const std::string& existing_key, const std::string& new_key) override {
    DropPrimed();
    ASSIGN_OR_RETURN(Ino ino, Resolve(existing_key, false));
    ASSIGN_OR_RETURN(Ino dir, Resolve(ParentKey(new_key), true));
    std::string tmp = TempNameFor(BaseName(new_key));
    auto made = v_->vfs()->Link(Ctx::Root(), ino, dir, tmp);
    if (!made.ok()) return made.status().With("link " + Shown(new_key));
    Status st = v_->vfs()->Rename(Ctx::Root(), dir, tmp, dir, BaseName(new_key), 0);
    if (!st.ok()) v_->vfs()->Unlink(Ctx::Root(), dir, tmp).ok();
    return st;
  }

  Status SetAttrs(const Entry& e, bool perms) override {
    DropPrimed();
    ASSIGN_OR_RETURN(Ino ino, Resolve(e.key, false));
    return SetInode(ino, e, perms ? e.mode : DefaultMode(e), perms, 0);
  }

  Status Remove(const Entry& e) override {
    DropPrimed();
    auto dir = Resolve(ParentKey(e.key), false);
    if (!dir.ok()) return dir.status().code() == ENOENT ? Status::OK() : dir.status();
    Status st = e.is_dir() ? v_->vfs()->Rmdir(Ctx::Root(), *dir, BaseName(e.key))
                           : v_->vfs()->Unlink(Ctx::Root(), *dir, BaseName(e.key));
    if (e.is_dir()) Forget(TrimKey(e.key));
    if (!st.ok() && st.code() != ENOENT) return st.With("remove " + Shown(e.key));
    return Status::OK();
  }

  Status RemoveAll(const std::string& key) override {
    DropPrimed();
    ASSIGN_OR_RETURN(Ino parent, Resolve(ParentKey(key), false));
    ASSIGN_OR_RETURN(Ino dir, Resolve(key, false));
    for (;;) {
      auto r = v_->meta()->RemoveContents(Ctx::Root(), dir, 10000, /*trash=*/false);
      if (!r.ok()) return r.status().With("remove " + Shown(key));
      if (r->done) break;
    }
    Forget(TrimKey(key));
    Status st = v_->vfs()->Rmdir(Ctx::Root(), parent, BaseName(key));
    return st.ok() || st.code() == ENOENT ? Status::OK() : st.With("rmdir " + Shown(key));
  }

  Result<std::vector<std::pair<std::string, std::string>>> Xattrs(const Entry& e) override {
    ASSIGN_OR_RETURN(Ino ino, Resolve(e.key, false));
    std::vector<std::pair<std::string, std::string>> out;
    auto names = v_->meta()->ListXattr(Ctx::Root(), ino);
    if (!names.ok()) return names.status().With("list the extended attributes of " + Shown(e.key));
    for (const std::string& n : *names) {
      if (n.rfind("user.", 0) != 0) continue;
      auto v = v_->meta()->GetXattr(Ctx::Root(), ino, n);
      if (!v.ok()) {
        if (v.status().code() == ENODATA) continue;
        return v.status();
      }
      out.emplace_back(n, *v);
    }
    return out;
  }

  Status SetXattrs(const Entry& e, const std::vector<std::pair<std::string, std::string>>& x) override {
    ASSIGN_OR_RETURN(Ino ino, Resolve(e.key, false));
    for (const auto& [n, v] : x) RETURN_IF_ERROR(v_->meta()->SetXattr(Ctx::Root(), ino, n, v, 0));
    return Status::OK();
  }

  void SetListThreads(int n) override { list_threads_ = n; }

  Result<bool> IsDir(const std::string& key) override {
    auto ino = Resolve(key, false);
    if (!ino.ok()) return ino.status().code() == ENOENT || ino.status().code() == ENOTDIR ? Result<bool>(false)
                                                                                             : Result<bool>(ino.status());
    auto a = v_->meta()->GetAttr(*ino);
    if (!a.ok()) return a.status().code() == ENOENT ? Result<bool>(false) : Result<bool>(a.status());
    return (a->mode & S_IFMT) == S_IFDIR;
  }

  // ---- ChangeFeed: the volume's change log (meta/change_log.h)
  ChangeFeed* change_feed() override { return this; }
  std::string volume_uuid() const override { return v_->format().uuid; }
  bool logging() const override { return v_->format().changelog_hours > 0; }
  Result<std::pair<uint64_t, uint64_t>> Bounds() override {
    ASSIGN_OR_RETURN(ChangeLogBounds b, ChangeLogRange(v_->meta()->engine()));
    return std::make_pair(b.first, b.last);
  }

  Result<SourceChanges> Changed(uint64_t from, uint64_t to, bool* exact) override {
    *exact = true;
    std::set<Ino> inodes;
    std::unordered_set<Ino> freed;                                // attributes removed: gone
    std::unordered_map<Ino, std::pair<Ino, std::string>> named;  // child -> (parent, name) the log made
    Entries entries;  // (parent, name) written -> the inode it names at `to` (0: removed)
    if (to >= from) {
      RETURN_IF_ERROR(ReadChanges(v_->meta()->engine(), from, to - from + 1, [&](const ChangeRecord& r) {
        for (const auto& [key, value] : r.writes) {
          if (key.size() < 10 || key[0] != 'A') continue;
          Ino ino = keys::DecodeU64(std::string_view(key).substr(1, 8));
          if (key[9] == 'D') {
            Ino child = value && value->size() >= 8 ? keys::DecodeU64(value->substr(0, 8)) : 0;
            entries[{ino, key.substr(10)}] = child;
            if (child) named[child] = {ino, key.substr(10)};
          } else if (key[9] != 'C' && key[9] != 'T') {
            // Chunk records alone change no content: a write also puts the attributes
            // (length, mtime); records only rewritten are compaction and cleanup.
            inodes.insert(ino);
            if (key.size() == 10 && key[9] == 'I' && !value) freed.insert(ino);  // numbers are never reused
          }
        }
        return true;
      }));
    }
    if (inodes.size() + entries.size() > kMaxChanges) {
      *exact = false;
      return SourceChanges{};
    }
    // The keys of the changed inodes and of the directories of the entries written.
    std::vector<Ino> changed;
    for (Ino ino : inodes) {
      if (ino != base_ && !freed.count(ino)) changed.push_back(ino);  // the top's own attributes are not compared
    }
    ASSIGN_OR_RETURN(auto attrs, AttrsOf(changed));  // those removed since are left out: their entries' removal is logged
    std::set<Ino> want;
    for (const auto& e : entries) want.insert(e.first.first);
    for (const auto& [ino, a] : attrs) {
      if ((a.mode & S_IFMT) != S_IFDIR && a.nlink > 1) {
        *exact = false;  // its other names are not in the log
        return SourceChanges{};
      }
      want.insert(ino);
    }
    ASSIGN_OR_RETURN(auto key_of, KeysOf(want, named, entries, &attrs));
    // What the listing will look up, known here: an entry as the log left it at `to` (removed,
    // or naming an inode whose attributes were just read), else looked up in batches. Later
    // changes are the next round's.
    SourceChanges out;
    auto primed = std::make_shared<Primed>();
    std::vector<Meta::NameLookup> look;
    std::vector<std::string> look_keys;
    for (const auto& [entry, child] : entries) {  // sorted: the names of one directory together
      const auto& [parent, name] = entry;
      auto it = key_of.find(parent);
      if (it == key_of.end()) continue;
      std::string key = it->second.empty() ? name : it->second + "/" + name;
      if (primed->size() + look.size() < kMaxPrimed) {
        auto a = attrs.find(child);
        if (child == 0 || freed.count(child)) {
          primed->emplace(key, Meta::NameLookup{parent, name});
        } else if (a != attrs.end() && a->second.parent == parent &&
                   ((a->second.mode & S_IFMT) == S_IFDIR || a->second.nlink == 1)) {
          primed->emplace(key, Meta::NameLookup{parent, name, child, a->second});
        } else {
          look.push_back(Meta::NameLookup{parent, name});
          look_keys.push_back(key);
        }
      }
      out.keys.insert(key);
      out.entries.insert(std::move(key));
    }
    if (v_->meta()->LookupMany(Ctx::Root(), look.data(), look.size()).ok()) {  // else the listing says why
      for (size_t i = 0; i < look.size(); ++i) primed->emplace(std::move(look_keys[i]), std::move(look[i]));
    }
    for (Ino ino : changed) {
      auto it = key_of.find(ino);
      if (it == key_of.end() || it->second.empty()) continue;
      out.keys.insert(it->second);
      const Attr& a = attrs.at(ino);
      if (primed->size() < kMaxPrimed) primed->emplace(it->second, Meta::NameLookup{a.parent, BaseName(it->second), ino, a});
    }
    std::lock_guard<std::mutex> l(mu_);
    primed_ = std::move(primed);
    return out;
  }

  client::Volume* volume() { return v_.get(); }
  // Makes directory `base` (shown as `shown`) the side's root.
  void Rebase(Ino base, std::string shown) {
    std::lock_guard<std::mutex> l(mu_);
    base_ = base;
    shown_ = std::move(shown);
    dirs_.clear();
  }

  // Resolves key's inode below the base ("": the base), making missing directories when make.
  Result<Ino> Resolve(const std::string& key_in, bool make) {
    std::string key = TrimKey(key_in);
    if (key.empty()) return base_;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = dirs_.find(key);
      if (it != dirs_.end()) return it->second;
    }
    ASSIGN_OR_RETURN(Ino parent, Resolve(ParentKey(key), make));
    std::string name = BaseName(key);
    auto found = v_->meta()->Lookup(Ctx::Root(), parent, name);
    Ino ino = 0;
    bool in_the_way = found.ok() && (found->second.mode & S_IFMT) != S_IFDIR && make;
    if (in_the_way) {  // a file or symlink where the source has a directory: replaced, as rsync does
      Status st = v_->vfs()->Unlink(Ctx::Root(), parent, name);
      if (!st.ok()) return st.With("replace " + Shown(key) + " by a directory");
    }
    if (found.ok() && !in_the_way) {
      ino = found->first;
      if ((found->second.mode & S_IFMT) != S_IFDIR) return ino;  // files are not remembered
    } else if ((in_the_way || found.status().code() == ENOENT) && make) {
      auto made = v_->vfs()->Mkdir(Ctx::Root(), parent, name, 0755);
      if (!made.ok() && made.status().code() != EEXIST) return made.status().With("mkdir " + Shown(key));
      auto again = v_->meta()->Lookup(Ctx::Root(), parent, name);
      if (!again.ok()) return again.status().With("look up " + Shown(key));
      ino = again->first;
    } else {
      return found.status().With("look up " + Shown(key));
    }
    std::lock_guard<std::mutex> l(mu_);
    if (dirs_.size() > 100000) dirs_.clear();
    dirs_[key] = ino;
    return ino;
  }

 private:
  std::string Shown(const std::string& key) const { return shown_ + "/" + key; }

  // The attributes of inodes, kPage per transaction; those that do not exist are left out,
  // and one whose attributes are damaged is an error that names its record.
  Result<std::unordered_map<Ino, Attr>> AttrsOf(const std::vector<Ino>& inos) {
    std::unordered_map<Ino, Attr> out;
    std::vector<DirEntry> batch;
    for (size_t i = 0; i < inos.size(); i += kPage) {
      batch.assign(std::min(kPage, inos.size() - i), DirEntry());
      for (size_t k = 0; k < batch.size(); ++k) batch[k].ino = inos[i + k];
      std::vector<DamagedRecord> damaged;
      RETURN_IF_ERROR(v_->meta()->FillAttrs(batch.data(), batch.size(), &damaged));
      if (!damaged.empty()) {
        return Status::Err(EIO, "damaged metadata " + keys::Describe(damaged[0].key) + " (" + damaged[0].what +
                                    ") named by the change log: see `tierfs fsck`");
      }
      for (const DirEntry& d : batch) {
        if (d.attr.mode != 0) out.emplace(d.ino, d.attr);
      }
    }
    return out;
  }

  // The keys below the base of inodes want (files by their first name; those not below the
  // base, or gone, are left out), from their attributes (known: those already read). Names
  // come from the log's own entries when it left them naming the inode, else
  // from one scan of each parent's entries for all its children wanted, level by level up to
  // the base: a directory of a million entries is read once per round, not once per child.
  // The directories named on the way are remembered for Resolve.
  Result<std::map<Ino, std::string>> KeysOf(const std::set<Ino>& want,
                                            const std::unordered_map<Ino, std::pair<Ino, std::string>>& named,
                                            const Entries& entries, const std::unordered_map<Ino, Attr>* known) {
    std::unordered_map<Ino, std::pair<Ino, std::string>> up;  // inode -> (parent, name), found
    std::unordered_set<Ino> gone;                              // not below the base
    std::unordered_set<Ino> dirs;                              // known to be directories
    std::set<Ino> level(want.begin(), want.end());
    for (int depth = 0; !level.empty() && depth < 1024; ++depth) {
      std::vector<Ino> todo, unknown;
      for (Ino dir : level) {
        if (dir == base_ || up.count(dir) || gone.count(dir)) continue;
        if (dir == kRootIno) {
          gone.insert(dir);
          continue;
        }
        todo.push_back(dir);
        if (!(depth == 0 && known && known->count(dir))) unknown.push_back(dir);
      }
      ASSIGN_OR_RETURN(auto read, AttrsOf(unknown));
      std::map<Ino, std::set<Ino>> by_parent;  // parent -> children whose names are unknown
      std::set<Ino> next;
      for (Ino dir : todo) {
        const Attr* a = nullptr;
        if (auto r = read.find(dir); r != read.end()) {
          a = &r->second;
        } else if (depth == 0 && known) {
          if (auto k = known->find(dir); k != known->end()) a = &k->second;
        }
        if (!a || (depth > 0 && (a->mode & S_IFMT) != S_IFDIR) || a->parent == dir) {
          gone.insert(dir);
          continue;
        }
        if ((a->mode & S_IFMT) == S_IFDIR) dirs.insert(dir);
        // The name the log gave it, if the log left that name naming it.
        auto hint = named.find(dir);
        if (hint != named.end() && hint->second.first == a->parent) {
          auto e = entries.find(hint->second);
          if (e != entries.end() && e->second == dir) {
            up[dir] = hint->second;
            next.insert(a->parent);
            continue;
          }
        }
        by_parent[a->parent].insert(dir);
      }
      for (auto& [parent, children] : by_parent) {
        for (std::string from; !children.empty();) {
          bool more = false;
          auto page = v_->meta()->ReaddirPage(Ctx::Root(), parent, from, kPage, false, &more);
          if (!page.ok()) {
            if (page.status().code() == ENOENT) break;
            return page.status();
          }
          for (const DirEntry& d : *page) {
            if (children.erase(d.ino)) up[d.ino] = {parent, d.name};
          }
          if (!more || page->empty()) break;
          from = page->back().name + std::string(1, '\0');
        }
        for (Ino lost : children) gone.insert(lost);  // removed or moved meanwhile
        next.insert(parent);
      }
      for (Ino parent : next) dirs.insert(parent);
      level = std::move(next);
    }
    std::map<Ino, std::string> out;
    std::unordered_map<Ino, std::optional<std::string>> memo;
    std::function<std::optional<std::string>(Ino, int)> key_of = [&](Ino dir, int depth) -> std::optional<std::string> {
      if (dir == base_) return std::string();
      if (depth > 1024 || gone.count(dir)) return std::nullopt;
      auto m = memo.find(dir);
      if (m != memo.end()) return m->second;
      std::optional<std::string> key;
      auto it = up.find(dir);
      if (it != up.end()) {
        auto parent = key_of(it->second.first, depth + 1);
        if (parent) key = parent->empty() ? it->second.second : *parent + "/" + it->second.second;
      }
      memo[dir] = key;
      return key;
    };
    for (Ino dir : want) {
      auto key = key_of(dir, 0);
      if (key) out.emplace(dir, *key);
    }
    std::lock_guard<std::mutex> l(mu_);
    for (Ino dir : dirs) {
      auto key = key_of(dir, 0);
      if (key && !key->empty() && dirs_.size() < 100000) dirs_[*key] = dir;
    }
    return out;
  }

  // A write makes the entries looked up ahead stale.
  void DropPrimed() {
    std::lock_guard<std::mutex> l(mu_);
    primed_.reset();
  }
  std::shared_ptr<const Primed> GetPrimed() {
    std::lock_guard<std::mutex> l(mu_);
    return primed_;
  }

  void Forget(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    dirs_.erase(key);
  }

  Status WriteAll(uint64_t fh, Source& src, const std::string& shown) {
    return PumpSource(src, [&](uint64_t off, const char* data, size_t n) {
      Status st = v_->vfs()->Write(fh, off, data, n);
      return st.ok() ? st : st.With("write " + shown);
    });
  }

  Status SetInode(Ino ino, const Entry& e, uint32_t mode, bool perms, uint64_t fh) {
    Attr a;
    uint32_t mask = kSetMtime;
    a.mtime_ns = e.mtime_ns;
    if (e.kind != Kind::kSymlink && (perms || e.kind == Kind::kFile || e.mode != 0)) {
      mask |= kSetMode;
      a.mode = mode;
    }
    if (perms) {
      mask |= kSetUid | kSetGid;
      a.uid = e.uid;
      a.gid = e.gid;
    }
    auto r = v_->vfs()->SetAttr(Ctx::Root(), ino, mask, a, fh);
    return r.ok() ? Status::OK() : r.status();
  }

  std::unique_ptr<client::Volume> v_;
  Ino base_;
  std::string shown_;
  std::mutex mu_;
  std::unordered_map<std::string, Ino> dirs_;  // directory key -> inode, guarded by mu_
  std::shared_ptr<const Primed> primed_;       // guarded by mu_
  const uint64_t dev_ = NewDevTag();
  int list_threads_ = 1;
};

}  // namespace

Result<std::unique_ptr<Side>> OpenVolumeSide(const client::VolumeOptions& options, const std::string& path,
                                             bool create) {
  client::VolumeOptions o = options;
  if (!create) o.read_only = true;
  auto v = client::Volume::Open(o);
  if (!v.ok()) return v.status();
  Ino root = (*v)->root();
  std::string shown = (*v)->format().name + ":";  // "NAME:" + "/path"
  auto side = std::make_unique<VolumeSide>(std::move(v).value(), root, shown);
  std::string p = path;
  while (!p.empty() && p.front() == '/') p.erase(0, 1);
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (p.empty()) return std::unique_ptr<Side>(std::move(side));
  auto base = side->Resolve(p, create);
  if (!base.ok()) return base.status();
  auto attr = side->volume()->meta()->GetAttr(*base);
  if (!attr.ok()) return attr.status();
  if ((attr->mode & S_IFMT) != S_IFDIR) return Status::Err(ENOTDIR, shown + "/" + p + " is not a directory");
  side->Rebase(*base, shown + "/" + p);
  return std::unique_ptr<Side>(std::move(side));
}

}  // namespace tierfs::sync
