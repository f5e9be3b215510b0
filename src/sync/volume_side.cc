#include "sync/volume_side.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <functional>
#include <map>
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

// A directory's entries, a page at a time; or only those named (sorted), looked up one by one.
class PageStream : public DirStream {
 public:
  PageStream(Meta* meta, Ino dir, std::string shown, NameList names)
      : meta_(meta), dir_(dir), shown_(std::move(shown)), names_(std::move(names)) {}
  Result<bool> Next(Entry* e) override {
    for (;;) {
      if (names_ && i_ == page_.size()) {
        page_.clear();
        i_ = 0;
        for (; page_.empty() && n_ < names_->size(); ++n_) {
          const std::string& name = (*names_)[n_];
          auto found = meta_->Lookup(Ctx::Root(), dir_, name);
          if (!found.ok() && found.status().code() == ENOENT) continue;
          if (!found.ok()) return found.status().With("look up " + shown_ + name);
          DirEntry d;
          d.name = name;
          d.ino = found->first;
          d.attr = found->second;
          d.type = found->second.mode & S_IFMT;
          page_.push_back(std::move(d));
        }
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
      e->dev = 1;
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
  Meta* meta_;
  Ino dir_;
  std::string shown_, from_;
  NameList names_;
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
          return std::unique_ptr<DirStream>(new PageStream(v_->meta(), dir, shown_ + "/" + dir_key, names));
        },
        start, descend, list_threads_, children);
  }

  Result<std::unique_ptr<Reader>> Open(const Entry& e) override {
    ASSIGN_OR_RETURN(Ino ino, Resolve(e.key, false));
    auto fh = v_->vfs()->Open(Ctx::Root(), ino, O_RDONLY);
    if (!fh.ok()) return fh.status().With("open " + Shown(e.key));
    return std::unique_ptr<Reader>(new VfsReader(v_->vfs(), fh->fh, Shown(e.key)));
  }

  Status Put(const Entry& e, Source& src, bool perms) override {
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

  Status Mkdir(const Entry& e) override { return Resolve(e.key, true).status(); }

  Status Symlink(const Entry& e, bool perms) override {
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
    ASSIGN_OR_RETURN(Ino ino, Resolve(e.key, false));
    return SetInode(ino, e, perms ? e.mode : DefaultMode(e), perms, 0);
  }

  Status Remove(const Entry& e) override {
    auto dir = Resolve(ParentKey(e.key), false);
    if (!dir.ok()) return dir.status().code() == ENOENT ? Status::OK() : dir.status();
    Status st = e.is_dir() ? v_->vfs()->Rmdir(Ctx::Root(), *dir, BaseName(e.key))
                           : v_->vfs()->Unlink(Ctx::Root(), *dir, BaseName(e.key));
    if (e.is_dir()) Forget(TrimKey(e.key));
    if (!st.ok() && st.code() != ENOENT) return st.With("remove " + Shown(e.key));
    return Status::OK();
  }

  Status RemoveAll(const std::string& key) override {
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
    std::unordered_map<Ino, std::pair<Ino, std::string>> named;  // child -> (parent, name) the log made
    std::set<std::pair<Ino, std::string>> entries;                // (parent, name) written
    if (to >= from) {
      RETURN_IF_ERROR(ReadChanges(v_->meta()->engine(), from, to - from + 1, [&](const ChangeRecord& r) {
        for (const auto& [key, value] : r.writes) {
          if (key.size() < 10 || key[0] != 'A') continue;
          Ino ino = keys::DecodeU64(std::string_view(key).substr(1, 8));
          if (key[9] == 'D') {
            entries.emplace(ino, key.substr(10));
            if (value && value->size() >= 8) named[keys::DecodeU64(value->substr(0, 8))] = {ino, key.substr(10)};
          } else if (key[9] != 'C' && key[9] != 'T') {
            // Chunk records alone change no content: a write also puts the attributes
            // (length, mtime); records only rewritten are compaction and cleanup.
            inodes.insert(ino);
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
    std::unordered_map<Ino, Attr> attrs;
    std::set<Ino> want;
    for (const auto& e : entries) want.insert(e.first);
    for (Ino ino : inodes) {
      if (ino == base_) continue;  // the top's own attributes are not compared
      auto a = v_->meta()->GetAttr(ino);
      if (!a.ok()) {
        if (a.status().code() == ENOENT) continue;  // removed since; its entry's removal is logged
        return a.status().With("read inode " + std::to_string(ino) + " named by the change log");
      }
      if ((a->mode & S_IFMT) != S_IFDIR && a->nlink > 1) {
        *exact = false;  // its other names are not in the log
        return SourceChanges{};
      }
      want.insert(ino);
      attrs.emplace(ino, *a);
    }
    ASSIGN_OR_RETURN(auto key_of, KeysOf(want, named, &attrs));
    SourceChanges out;
    for (Ino ino : inodes) {
      auto it = key_of.find(ino);
      if (it != key_of.end() && !it->second.empty()) out.keys.insert(it->second);
    }
    for (const auto& [parent, name] : entries) {
      auto it = key_of.find(parent);
      if (it == key_of.end()) continue;
      std::string key = it->second.empty() ? name : it->second + "/" + name;
      out.keys.insert(key);
      out.entries.insert(std::move(key));
    }
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

  // The keys below the base of inodes want (files by their first name; those not below the
  // base, or gone, are left out), from their attributes (known: those already read). Names
  // come from the log's own entries when it made them (checked with one lookup each), else
  // from one scan of each parent's entries for all its children wanted, level by level up to
  // the base: a directory of a million entries is read once per round, not once per child.
  Result<std::map<Ino, std::string>> KeysOf(const std::set<Ino>& want,
                                            const std::unordered_map<Ino, std::pair<Ino, std::string>>& named,
                                            const std::unordered_map<Ino, Attr>* known) {
    std::unordered_map<Ino, std::pair<Ino, std::string>> up;  // inode -> (parent, name), found
    std::unordered_set<Ino> gone;                              // not below the base
    std::set<Ino> level(want.begin(), want.end());
    for (int depth = 0; !level.empty() && depth < 1024; ++depth) {
      std::map<Ino, std::set<Ino>> by_parent;  // parent -> children whose names are unknown
      std::set<Ino> next;
      for (Ino dir : level) {
        if (dir == base_ || up.count(dir) || gone.count(dir)) continue;
        if (dir == kRootIno) {
          gone.insert(dir);
          continue;
        }
        std::optional<Attr> a;
        auto k = depth == 0 && known ? known->find(dir) : std::unordered_map<Ino, Attr>::const_iterator();
        if (depth == 0 && known && k != known->end()) {
          a = k->second;
        } else {
          auto got = v_->meta()->GetAttr(dir);
          if (!got.ok() && got.status().code() != ENOENT) return got.status();
          if (got.ok()) a = *got;
        }
        if (!a || (depth > 0 && (a->mode & S_IFMT) != S_IFDIR) || a->parent == dir) {
          gone.insert(dir);
          continue;
        }
        auto hint = named.find(dir);
        if (hint != named.end() && hint->second.first == a->parent) {
          auto found = v_->meta()->Lookup(Ctx::Root(), a->parent, hint->second.second);
          if (found.ok() && found->first == dir) {
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
    return out;
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
