// Directory listing in pages (the S3 gateway's ListObjects): a page of entries after a name,
// read in one transaction that costs the page, not the directory.
#include "common/encoding.h"
#include "meta/meta.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT

Result<std::vector<DirEntry>> Meta::ReaddirPage(const Ctx& ctx, Ino ino, const std::string& from, size_t limit,
                                                bool plus, bool* more, const std::string& xattr) {
  std::vector<DirEntry> out;
  bool has_more = false;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
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
          ByteReader r(v);
          DirEntry e;
          e.name = std::string(name);
          e.ino = r.U64();
          e.type = static_cast<uint32_t>(r.U8()) << 12;
          if (!r.ok()) return true;  // a damaged entry is left out of the page
          out.push_back(std::move(e));
          return true;
        }));
        for (auto& e : out) {
          if (plus) {
            Status st = GetAttrTx(t, e.ino, &e.attr);
            if (!st.ok() && st.code() != ENOENT) return st;
          }
          if (!xattr.empty()) {
            ASSIGN_OR_RETURN(e.xattr, t.Get(keys::Xattr(e.ino, xattr)));
          }
        }
        return Status::OK();
      },
      true));
  if (more) *more = has_more;
  return out;
}

}  // namespace tierfs
