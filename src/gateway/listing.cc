#include "gateway/listing.h"

#include <map>
#include <optional>

#include "gateway/keys.h"
#include "vfs/vfs.h"

namespace tierfs::gateway {
namespace {

constexpr size_t kBatch = 1000;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

ObjectMeta MetaOf(const DirEntry& e) {
  if (e.xattr) {
    if (auto m = ObjectMeta::FromJson(*e.xattr, true)) return std::move(*m);
  }
  return ObjectMeta{};
}

// One directory being walked.
struct Cursor {
  Ino ino = 0;
  std::string path;         // the key prefix of its entries ("" at the bucket, "a/b/" below)
  std::string from;         // the next page starts at names >= from
  std::string name_prefix;  // only names starting with this (the top level of a prefix)
  std::vector<DirEntry> page;
  size_t pos = 0;
  bool more = true;
  std::map<std::string, DirEntry> pending;  // directories waiting for their turn, by name + "/"
  bool any = false;             // an entry of it was returned (it is not an empty directory)
  bool dir_emitted = false;     // its own "dir/" object was returned (or is before the start)
  ObjectInfo self;              // the directory itself, for its "dir/" object
};

struct Item {
  enum Kind { kEnd, kFile, kDir } kind = kEnd;
  DirEntry entry;
};

class Walk {
 public:
  Walk(Objects* o, const Caller& c, bool recursive) : o_(o), meta_(o->vfs()->meta()), c_(c), recursive_(recursive) {}

  // Next entry of the cursor in S3 order.
  S3Result<Item> Next(Cursor& cur) {
    for (;;) {
      if (cur.pos == cur.page.size() && cur.more) {
        bool more = false;
        auto page = meta_->ReaddirPage(c_.ctx, cur.ino, cur.from, kBatch, true, &more, kObjectXattr);
        if (!page.ok()) return FromStatus(page.status(), cur.path);
        cur.page = std::move(*page);
        cur.pos = 0;
        cur.more = more;
        if (!cur.page.empty()) cur.from = cur.page.back().name + std::string(1, '\0');
      }
      DirEntry* e = cur.pos < cur.page.size() ? &cur.page[cur.pos] : nullptr;
      if (e && !cur.name_prefix.empty() && !StartsWith(e->name, cur.name_prefix)) {
        if (e->name > cur.name_prefix) {  // past every name with the prefix
          cur.page.clear();
          cur.pos = 0;
          cur.more = false;
          e = nullptr;
        } else {
          cur.pos++;
          continue;
        }
      }
      if (!cur.pending.empty() && (!e || cur.pending.begin()->first < Key(*e))) {
        Item it{Item::kDir, std::move(cur.pending.begin()->second)};
        cur.pending.erase(cur.pending.begin());
        return it;
      }
      if (!e) return Item{};
      cur.pos++;
      if (o_->IsGatewayDir(cur.ino, e->name)) continue;
      // The page's entries are not read again once passed: moved, not copied.
      if (e->attr.IsDir()) {
        std::string key = e->name + "/";
        cur.pending.emplace(std::move(key), std::move(*e));
        continue;
      }
      if (!e->attr.IsRegular()) continue;
      return Item{Item::kFile, std::move(*e)};
    }
  }

  // Adds the directories of cur whose turn comes after a resume point although their
  // names sort before it: proper prefixes n of `name` followed by a byte below '/' (and
  // `name` itself when with_self).
  S3Result<bool> AddPendingBefore(Cursor& cur, const std::string& name, bool with_self) {
    for (size_t len = 1; len <= name.size(); ++len) {
      bool self = len == name.size();
      if (self ? !with_self : static_cast<unsigned char>(name[len]) >= '/') continue;
      std::string n = name.substr(0, len);
      if (!StartsWith(n, cur.name_prefix) || o_->IsGatewayDir(cur.ino, n)) continue;
      auto found = meta_->Lookup(c_.ctx, cur.ino, n);
      if (!found.ok()) {
        if (found.status().code() == ENOENT) continue;
        return FromStatus(found.status(), cur.path + n);
      }
      if (!found->second.IsDir()) continue;
      DirEntry e;
      e.name = n;
      e.ino = found->first;
      e.attr = found->second;
      auto x = meta_->GetXattr(Ctx::Root(), e.ino, kObjectXattr);
      if (x.ok()) e.xattr = *x;
      cur.pending.emplace(n + "/", std::move(e));
    }
    return true;
  }

  Cursor Child(const Cursor& parent, const DirEntry& e) {
    Cursor c;
    c.ino = e.ino;
    c.path = parent.path + e.name + "/";
    c.self.ino = e.ino;
    c.self.parent = parent.ino;
    c.self.attr = e.attr;
    c.self.meta = MetaOf(e);
    c.self.dir = true;
    c.self.meta.etag = kEmptyEtag;
    return c;
  }

  ObjectInfo FileInfo(const Cursor& cur, const DirEntry& e) {
    ObjectInfo o;
    o.ino = e.ino;
    o.parent = cur.ino;
    o.attr = e.attr;
    o.meta = MetaOf(e);
    return o;
  }

  Objects* o_;
  Meta* meta_;
  const Caller& c_;
  bool recursive_;

 private:
  static std::string Key(const DirEntry& e) { return e.attr.IsDir() ? e.name + "/" : e.name; }
};

}  // namespace

S3Result<ListResult> Lister::List(const Caller& c, Ino bucket, const ListRequest& req) {
  ListResult out;
  const std::string& P = req.prefix;
  const std::string& K = req.start_after;
  const bool slash_delim = req.delimiter == "/";
  const bool recursive = !slash_delim;  // other delimiters: the full walk, grouped below
  const bool grouping = !req.delimiter.empty() && !slash_delim;
  if (req.max_keys == 0) return out;
  // Keys after K with the prefix P: none when K is past all of them.
  if (!K.empty() && !StartsWith(K, P) && K > P) return out;
  const std::string start = StartsWith(K, P) ? K : "";
  // The directory of the prefix, and the part of a name the prefix fixes.
  const size_t cut = P.rfind('/') == std::string::npos ? 0 : P.rfind('/') + 1;
  const std::string D = P.substr(0, cut), N = P.substr(cut);
  Walk w(objects_, c, recursive);
  Meta* meta = w.meta_;
  Cursor top;
  top.ino = bucket;
  top.path = D;
  top.name_prefix = N;
  top.from = N;
  top.dir_emitted = true;
  top.any = true;
  if (!D.empty()) {
    auto k = ParseKey(D);
    if (!k.ok()) return out;  // a prefix no key can have
    Ino dir = bucket;
    for (const auto& part : k->dirs) {
      auto found = meta->Lookup(c.ctx, dir, part);
      if (!found.ok()) {
        if (found.status().code() == ENOENT || found.status().code() == ENOTDIR) return out;
        return FromStatus(found.status(), D);
      }
      if (!found->second.IsDir()) return out;
      dir = found->first;
    }
    top.ino = dir;
  }
  std::vector<Cursor> stack;
  stack.push_back(std::move(top));
  // The directory of the prefix is itself the object "D" when marked ("a/b/" lists "a/b/").
  std::optional<ObjectInfo> d_object;
  if (!D.empty() && N.empty() && D > start) {
    auto x = meta->GetXattr(Ctx::Root(), stack[0].ino, kObjectXattr);
    if (x.ok()) {
      auto m = ObjectMeta::FromJson(*x);
      if (m && m->dir == "explicit") {
        auto a = meta->GetAttr(stack[0].ino);
        if (a.ok()) {
          ObjectInfo o;
          o.ino = stack[0].ino;
          o.attr = *a;
          o.meta = *m;
          o.meta.etag = kEmptyEtag;
          o.dir = true;
          d_object = o;
        }
      }
    }
  }
  // Resume after `start` (relative to D): walk down its directories.
  if (!start.empty() && start.size() > D.size()) {
    std::string r = start.substr(D.size());
    Cursor* cur = &stack.back();
    for (;;) {
      size_t slash = r.find('/');
      if (slash == std::string::npos) {
        cur->from = std::max(cur->from, r + std::string(1, '\0'));
        auto ok = w.AddPendingBefore(*cur, r, true);
        if (!ok.ok()) return ok.error();
        break;
      }
      std::string comp = r.substr(0, slash);
      std::string rest = r.substr(slash + 1);
      cur->from = std::max(cur->from, comp + "/");
      auto ok = w.AddPendingBefore(*cur, comp, false);
      if (!ok.ok()) return ok.error();
      if (slash_delim) break;  // the common prefix comp/ is done
      auto found = meta->Lookup(c.ctx, cur->ino, comp);
      if (!found.ok() || !found->second.IsDir()) break;
      DirEntry e;
      e.name = comp;
      e.ino = found->first;
      e.attr = found->second;
      Cursor child = w.Child(*cur, e);
      child.dir_emitted = true;  // "comp/" is at or before the start
      child.any = true;
      stack.push_back(std::move(child));
      cur = &stack.back();
      r = rest;
    }
  }
  std::string last_group;
  if (grouping && !start.empty()) {
    size_t at = start.find(req.delimiter, P.size());
    if (at != std::string::npos && at + req.delimiter.size() == start.size()) last_group = start;
  }
  // Emits one key; false once the page is full and one more key was found.
  auto full = [&]() { return out.objects.size() + out.prefixes.size() >= req.max_keys; };
  auto emit_object = [&](const std::string& key, ObjectInfo info) -> S3Result<bool> {
    if (grouping) {
      size_t at = key.find(req.delimiter, P.size());
      if (at != std::string::npos) {
        std::string group = key.substr(0, at + req.delimiter.size());
        if (group == last_group) return true;
        if (full()) {
          out.truncated = true;
          return false;
        }
        last_group = group;
        out.prefixes.push_back(group);
        out.last = group;
        return true;
      }
    }
    if (full()) {
      out.truncated = true;
      return false;
    }
    if (!info.dir && (info.meta.etag.empty() || info.meta.seq != info.attr.seq)) {
      info.meta.etag = Objects::IdentityEtag(info);  // no MD5 yet: HEAD or GET computes it
    }
    out.objects.push_back(ListedObject{key, std::move(info)});
    out.last = key;
    return true;
  };
  if (d_object) {
    auto ok = emit_object(D, *d_object);
    if (!ok.ok()) return ok.error();
  }
  while (!stack.empty()) {
    Cursor& cur = stack.back();
    auto item = w.Next(cur);
    if (!item.ok()) return item.error();
    if (item->kind == Item::kEnd) {
      // An empty directory is the object "dir/", unless the gateway made it for keys below
      // (then it is a leftover of a write that failed half-way, not an object).
      bool empty_dir = recursive && !cur.any && !cur.dir_emitted && cur.self.meta.dir != "implicit";
      ObjectInfo self = cur.self;
      std::string key = cur.path;
      stack.pop_back();
      if (empty_dir) {
        auto ok = emit_object(key, self);
        if (!ok.ok()) return ok.error();
        if (!*ok) break;
      }
      continue;
    }
    cur.any = true;
    if (item->kind == Item::kFile) {
      auto ok = emit_object(cur.path + item->entry.name, w.FileInfo(cur, item->entry));
      if (!ok.ok()) return ok.error();
      if (!*ok) break;
      continue;
    }
    // A directory's turn.
    std::string key = cur.path + item->entry.name + "/";
    if (slash_delim) {
      if (full()) {
        out.truncated = true;
        break;
      }
      out.prefixes.push_back(key);
      out.last = key;
      continue;
    }
    Cursor child = w.Child(cur, item->entry);
    if (child.self.meta.dir == "explicit") {
      auto ok = emit_object(key, child.self);
      if (!ok.ok()) return ok.error();
      if (!*ok) break;
      child.dir_emitted = true;
    }
    stack.push_back(std::move(child));
  }
  return out;
}

}  // namespace tierfs::gateway
