// Directory listing in pages (the S3 gateway's ListObjects): a page of entries after a name,
// read in one transaction that costs the page, not the directory; and many names looked up
// in one transaction (sync's incremental rounds).
#include <algorithm>

#include "common/encoding.h"
#include "meta/meta.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"
#include "meta/record_check.h"

namespace tierfs {

using namespace internal;  // NOLINT

Result<std::vector<DirEntry>> Meta::ReaddirPage(const Ctx& ctx, Ino ino, const std::string& from, size_t limit,
                                                bool plus, bool* more, const std::string& xattr) {
  std::vector<DirEntry> out;
  std::vector<DamagedRecord> bad;
  bool has_more = false;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        bad.clear();
        has_more = false;
        Attr a;
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        if (!a.IsDir()) return NotDir(ino);
        RETURN_IF_ERROR(CheckAccessTx(t, ctx, ino, a, R_OK));
        const std::string prefix = keys::DentryPrefix(ino);
        // Names are stored in byte order under the prefix.
        std::string begin = keys::Dentry(ino, from);
        RETURN_IF_ERROR(t.Scan(begin, PrefixEnd(prefix), limit + 1, [&](std::string_view k, std::string_view v) {
          if (out.size() == limit) {
            has_more = true;
            return false;
          }
          std::string_view name;
          if (!keys::ParseDentryName(k, &name)) return true;
          // A damaged entry is left out of the page (and logged), as Readdir does.
          DirEntry e;
          std::string what = record_check::EntryName(name);
          if (what.empty()) what = record_check::EntryValue(v, &e.ino, &e.type);
          if (!what.empty()) {
            bad.push_back(DamagedRecord{std::string(k), what});
            return true;
          }
          e.name = std::string(name);
          e.type <<= 12;
          out.push_back(std::move(e));
          return true;
        }));
        // The attributes and the xattr of the whole page in one read of many keys (one
        // round trip on Redis and PostgreSQL, few statements on SQLite).
        std::vector<std::string> ks;
        ks.reserve(out.size() * 2);
        for (const auto& e : out) {
          if (plus) ks.push_back(keys::Inode(e.ino));
          if (!xattr.empty()) ks.push_back(keys::Xattr(e.ino, xattr));
        }
        if (ks.empty()) return Status::OK();
        ASSIGN_OR_RETURN(auto vs, t.GetMany(ks));
        size_t i = 0;
        for (auto& e : out) {
          if (plus) {
            const auto& v = vs[i++];
            if (v && !DecodeAttr(*v, &e.attr)) {
              e.attr = Attr();  // listed without attributes
              bad.push_back(DamagedRecord{keys::Inode(e.ino), "attributes that cannot be decoded"});
            }
          }
          if (!xattr.empty()) e.xattr = std::move(vs[i++]);
        }
        return Status::OK();
      },
      true));
  for (const auto& d : bad) record_check::LogDamaged(d);
  if (more) *more = has_more;
  return out;
}

Status internal::EntryFromValues(const Ctx& ctx, const Attr& parent, const std::string& name,
                                 const std::optional<std::string>& entry, const std::optional<std::string>& child,
                                 Ino* ino, Attr* attr) {
  if (!entry) return Status::Err(ENOENT, "no entry '" + name + "'");
  if (entry->size() < 8) return Status::Err(EIO, "corrupt directory entry '" + name + "'");
  *ino = keys::DecodeU64(std::string_view(*entry).substr(0, 8));
  if (!child) return Status::Err(ENOENT, "inode " + std::to_string(*ino) + " does not exist");
  if (!DecodeAttr(*child, attr)) return Status::Err(EIO, "inode " + std::to_string(*ino) + " has corrupt attributes");
  if (parent.parent == kTrashIno && ctx.uid != 0 && attr->uid != ctx.uid) {
    return Status::Err(ENOENT, "no entry '" + name + "'");
  }
  return Status::OK();
}

Status Meta::LookupMany(const Ctx& ctx, NameLookup* items, size_t n) {
  for (size_t done = 0; done < n;) {
    size_t end = std::min(n, done + kLookupBatch);
    std::vector<DirEntry> seen;  // for NoteAclFlags
    RETURN_IF_ERROR(engine_->Txn(
        [&](KvTxn& t) {
          seen.clear();
          Ino parent = 0;
          Attr pa;
          Status parent_ok = Status::OK();
          for (size_t i = done; i < end; ++i) {
            NameLookup& it = items[i];
            it.ino = 0;
            it.attr = Attr();
            if (it.parent != parent || i == done) {  // items of one directory come together
              parent = it.parent;
              parent_ok = GetAttrTx(t, parent, &pa);
              if (parent_ok.ok() && !pa.IsDir()) parent_ok = NotDir(parent);
              if (parent_ok.ok()) parent_ok = CheckAccessTx(t, ctx, parent, pa, X_OK);
              if (!parent_ok.ok() && parent_ok.code() != ENOENT && parent_ok.code() != ENOTDIR) return parent_ok;
            }
            if (!parent_ok.ok()) continue;  // the directory is gone: so are its names
            if (it.name.empty() || it.name.size() > kMaxName || it.name == "." || it.name == ".." ||
                (parent == kRootIno && it.name == kTrashName)) {
              return Status::Err(EINVAL, "LookupMany: '" + it.name + "' is not a plain name");
            }
            ASSIGN_OR_RETURN(auto v, t.GetIndirect({keys::Dentry(parent, it.name)}, keys::kInodeKeyHead, 8,
                                                   keys::kInodeKeyTail));
            Ino ino = 0;
            Status found = EntryFromValues(ctx, pa, it.name, v[0], v[1], &ino, &it.attr);
            if (found.code() == ENOENT) {
              it.attr = Attr();
              continue;
            }
            RETURN_IF_ERROR(found);
            it.ino = ino;
            DirEntry d;
            d.ino = ino;
            d.attr = it.attr;
            seen.push_back(std::move(d));
          }
          return Status::OK();
        },
        true));
    NoteAclFlags(seen.data(), seen.size());
    done = end;
  }
  return Status::OK();
}

}  // namespace tierfs
