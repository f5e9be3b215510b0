// The vfs's extended attributes: passed to the metadata layer, except the virtual
// "tierfs.info" (a file's layout, for `tierfs info`; "tierfs.info@N" pages it, since the
// kernel limits an xattr value to 64 KiB) and the root's "tierfs.pid", and a short memory
// of files without security.capability (the kernel asks before every write).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "common/clock.h"
#include "meta/slice_map.h"
#include "vfs/vfs.h"
#include "vfs/vfs_internal.h"

namespace tierfs {

namespace {
constexpr const char* kInfoXattr = "tierfs.info";
// "tierfs.info@N": a page of the layout from the file's Nth slice on, well below the
// kernel's 64 KiB limit on an xattr value whatever the number of slices.
constexpr std::string_view kInfoPagePrefix = "tierfs.info@";
constexpr size_t kInfoPageBytes = 32 << 10;
// On the root: the pid of the client serving this mount (`tierfs umount` waits for it).
constexpr const char* kPidXattr = "tierfs.pid";
bool IsInfoPage(const std::string& name) { return name.compare(0, kInfoPagePrefix.size(), kInfoPagePrefix) == 0; }
bool IsVirtualXattr(const std::string& name) {
  return name == kInfoXattr || IsInfoPage(name) || name == kPidXattr || Vfs::IsCacheXattr(name);
}
}  // namespace

Result<std::string> Vfs::GetXattr(const Ctx& ctx, Ino ino, const std::string& name) {
  if (name == kInfoXattr) return LayoutJson(ino);
  if (IsInfoPage(name)) {
    std::string n = name.substr(kInfoPagePrefix.size());
    if (n.empty() || n.size() > 19 || n.find_first_not_of("0123456789") != std::string::npos) {
      return Status::Err(EINVAL, std::string(kInfoPagePrefix) + "N takes a slice number, not '" + n + "'");
    }
    return LayoutJson(ino, std::stoull(n), kInfoPageBytes);
  }
  if (name == kPidXattr && ino == opts_.root) return std::to_string(getpid());
  if (IsCacheXattr(name)) return CacheXattr(ctx, ino, name);
  bool caps = name == kCapsXattr;
  std::shared_ptr<InodeState> st;
  if (caps) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = inodes_.find(ino);
    if (it != inodes_.end()) st = it->second;
  }
  if (st) {
    std::lock_guard<std::mutex> l(st->mu);
    if (st->no_caps_until_ns > MonoNanos()) return Status::Err(ENODATA, "no xattr " + name);
  }
  auto r = meta_->GetXattr(ctx, ino, name);
  if (st && r.status().code() == ENODATA) {
    std::lock_guard<std::mutex> l(st->mu);
    st->no_caps_until_ns = MonoNanos() + kNegativeXattrNs;
  }
  return r;
}

void Vfs::ForgetXattrCache(Ino ino) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  std::lock_guard<std::mutex> g(it->second->mu);
  it->second->no_caps_until_ns = 0;
}

void Vfs::ForgetOpenCache(Ino ino) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  std::lock_guard<std::mutex> g(it->second->mu);
  it->second->open_attr.reset();
}

bool Vfs::CloneTarget(const std::string& value, uint64_t* parent, std::string* name) {
  auto j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("parent") || !j.contains("name") ||
      !j["parent"].is_number_unsigned() || !j["name"].is_string()) {
    return false;
  }
  *parent = j["parent"].get<uint64_t>();
  *name = j["name"].get<std::string>();
  return true;
}

Status Vfs::SetXattr(const Ctx& ctx, Ino ino, const std::string& name, const std::string& value, int flags) {
  if (name == kCloneXattr) {
    Ino parent;
    std::string clone_name;
    if (!CloneTarget(value, &parent, &clone_name)) {
      return Status::Err(EINVAL, std::string(kCloneXattr) + " takes {\"parent\": INO, \"name\": NAME}");
    }
    if (parent == 1) parent = opts_.root;
    // What this client buffered for the source is committed first (files open elsewhere
    // in the tree are cloned as last committed).
    RETURN_IF_ERROR(FlushInode(*State(ino)));
    return meta_->Clone(ctx, ino, parent, clone_name).status();
  }
  if (IsVirtualXattr(name)) return Status::Err(EPERM, name + " is read-only");
  ForgetXattrCache(ino);
  ForgetOpenCache(ino);
  return meta_->SetXattr(ctx, ino, name, value, flags);
}

Result<std::vector<std::string>> Vfs::ListXattr(const Ctx& ctx, Ino ino) { return meta_->ListXattr(ctx, ino); }

Status Vfs::RemoveXattr(const Ctx& ctx, Ino ino, const std::string& name) {
  if (IsVirtualXattr(name)) return Status::Err(EPERM, name + " is read-only");
  ForgetXattrCache(ino);
  ForgetOpenCache(ino);
  return meta_->RemoveXattr(ctx, ino, name);
}

Result<std::string> Vfs::LayoutJson(Ino ino, uint64_t from, size_t page_bytes) {
  auto st = State(ino);
  RETURN_IF_ERROR(FlushInode(*st));
  ASSIGN_OR_RETURN(Attr a, meta_->GetAttr(ino));
  nlohmann::json j;
  j["inode"] = ino;
  j["length"] = a.length;
  j["volume"] = meta_->format().name;
  j["block_size"] = meta_->format().block_size;
  nlohmann::json chunks = nlohmann::json::array();
  uint64_t seen = 0;  // slices passed so far
  std::optional<uint64_t> next;
  size_t bytes = 0;
  if (a.IsRegular()) {
    ASSIGN_OR_RETURN(auto maps, ReadSliceMaps(meta_, ino));
    for (const auto& [idx, segs] : maps) {
      // A chunk without slices goes with the page of the slice before it.
      bool here = seen == 0 ? from == 0 : seen > from;
      nlohmann::json slices = nlohmann::json::array();
      for (const auto& s : segs) {
        if (s.id == 0) continue;
        uint64_t n = seen++;
        if (n < from) continue;
        nlohmann::json js = {{"pos", s.pos}, {"id", s.id}, {"size", s.size}, {"off", s.off}, {"len", s.len}};
        if (s.pack) js["pack"] = {{"id", s.pack}, {"len", s.pack_len}, {"off", s.pack_off}};
        if (page_bytes > 0) {
          size_t len = js.dump().size() + 1;
          if (bytes > 0 && bytes + len > page_bytes) {
            next = n;
            break;
          }
          bytes += len + (slices.empty() ? 32 : 0);  // the chunk's own fields on its first slice
        }
        slices.push_back(std::move(js));
      }
      if (!slices.empty() || (here && !next)) chunks.push_back({{"index", idx}, {"slices", slices}});
      if (next) break;
    }
  }
  j["chunks"] = chunks;
  if (page_bytes > 0) {
    j["page"] = {{"ctime_ns", a.ctime_ns}};
    if (next) j["page"]["next"] = *next;
  }
  return j.dump();
}

}  // namespace tierfs
