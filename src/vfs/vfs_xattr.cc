// The vfs's extended attributes: passed to the metadata layer, except the virtual
// "tierfs.info" (a file's layout, for `tierfs info`) and the root's "tierfs.pid", and a
// short memory of files without security.capability (the kernel asks before every write).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/slice_map.h"
#include "vfs/vfs.h"
#include "vfs/vfs_internal.h"

namespace tierfs {

namespace {
constexpr const char* kInfoXattr = "tierfs.info";
// On the root: the pid of the client serving this mount (`tierfs umount` waits for it).
constexpr const char* kPidXattr = "tierfs.pid";
bool IsVirtualXattr(const std::string& name) {
  return name == kInfoXattr || name == kPidXattr || Vfs::IsCacheXattr(name);
}
}  // namespace

Result<std::string> Vfs::GetXattr(const Ctx& ctx, Ino ino, const std::string& name) {
  if (name == kInfoXattr) return LayoutJson(ino);
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

Result<std::string> Vfs::LayoutJson(Ino ino) {
  auto st = State(ino);
  RETURN_IF_ERROR(FlushInode(*st));
  ASSIGN_OR_RETURN(Attr a, meta_->GetAttr(ino));
  nlohmann::json j;
  j["inode"] = ino;
  j["length"] = a.length;
  j["volume"] = meta_->format().name;
  j["block_size"] = meta_->format().block_size;
  nlohmann::json chunks = nlohmann::json::array();
  if (a.IsRegular()) {
    ASSIGN_OR_RETURN(auto maps, ReadSliceMaps(meta_, ino));
    for (const auto& [idx, segs] : maps) {
      nlohmann::json slices = nlohmann::json::array();
      for (const auto& s : segs) {
        if (s.id == 0) continue;
        nlohmann::json js = {{"pos", s.pos}, {"id", s.id}, {"size", s.size}, {"off", s.off}, {"len", s.len}};
        if (s.pack) js["pack"] = {{"id", s.pack}, {"len", s.pack_len}, {"off", s.pack_off}};
        slices.push_back(std::move(js));
      }
      chunks.push_back({{"index", idx}, {"slices", slices}});
    }
  }
  j["chunks"] = chunks;
  return j.dump();
}

}  // namespace tierfs
