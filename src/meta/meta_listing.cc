// Directory listing in pages (the S3 gateway's ListObjects): a page of entries after a name,
// read in one transaction that costs the page, not the directory.
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
        for (auto& e : out) {
          if (plus) {
            ASSIGN_OR_RETURN(auto v, t.Get(keys::Inode(e.ino)));
            if (v && !DecodeAttr(*v, &e.attr)) {
              e.attr = Attr();  // listed without attributes
              bad.push_back(DamagedRecord{keys::Inode(e.ino), "attributes that cannot be decoded"});
            }
          }
          if (!xattr.empty()) {
            ASSIGN_OR_RETURN(e.xattr, t.Get(keys::Xattr(e.ino, xattr)));
          }
        }
        return Status::OK();
      },
      true));
  for (const auto& d : bad) record_check::LogDamaged(d);
  if (more) *more = has_more;
  return out;
}

}  // namespace tierfs
