// Paths of inodes, for logs (slow operations, the access log). Directories know their
// parent; files know the directory of their first link (Attr::parent). A name is found by
// scanning the parent's entries, so this costs a scan per level: it is for the rare slow
// request, not for every one.
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT: shared helpers of the meta*.cc files

namespace {
constexpr size_t kMaxScan = 100000;  // entries scanned per directory before giving up
constexpr int kMaxDepth = 256;
}  // namespace

Result<std::string> Meta::PathOf(Ino ino, Ino root, const PathHint& hint) {
  if (ino == root) return std::string("/");
  std::string path;
  Ino cur = ino;
  for (int depth = 0; depth < kMaxDepth && cur != root; ++depth) {
    Attr a;
    std::string name, hinted_name;
    Ino parent = 0, hinted_parent = 0;
    const bool hinted = hint && hint(cur, &hinted_parent, &hinted_name);
    RETURN_IF_ERROR(engine_->Txn(
        [&](KvTxn& t) -> Status {
          name.clear();
          if (hinted) {
            // The hint holds if its entry still names this inode (a rename since makes
            // it stale: then the scan below).
            auto d = t.Get(keys::Dentry(hinted_parent, hinted_name));
            if (!d.ok()) return d.status();
            if (d->has_value() && (*d)->size() >= 8 && keys::DecodeU64(std::string_view(**d).substr(0, 8)) == cur) {
              name = hinted_name;
              parent = hinted_parent;
              return Status::OK();
            }
          }
          RETURN_IF_ERROR(GetAttrTx(t, cur, &a));
          parent = cur == kTrashIno ? kRootIno : a.parent;
          if (parent == 0) return Status::OK();
          if (cur == kTrashIno) {
            name = ".trash";
            return Status::OK();
          }
          const std::string prefix = keys::DentryPrefix(parent);
          return ScanPrefix(t, prefix, kMaxScan, [&](std::string_view k, std::string_view v) {
            if (v.size() >= 8 && keys::DecodeU64(v.substr(0, 8)) == cur) {
              name = std::string(k.substr(prefix.size()));
              return false;
            }
            return true;
          });
        },
        true));
    if (parent == 0 || name.empty()) {
      // Unlinked, or a name this scan could not find: say what is known.
      return "<inode " + std::to_string(cur) + ">" + path;
    }
    path = "/" + name + path;
    cur = parent;
  }
  return path;
}

}  // namespace tierfs
