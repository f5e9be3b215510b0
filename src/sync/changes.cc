#include "sync/changes.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sync/posix_write.h"

namespace tierfs::sync {
namespace {

// Writes path whole or not at all (a temporary file, fsync, rename).
Status WriteWhole(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Err(errno, "create " + tmp + ": " + strerror(errno));
  ssize_t n = write(fd, text.data(), text.size());
  int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  if (err == 0 && fsync(fd) != 0) err = errno;
  close(fd);
  if (err == 0 && rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    unlink(tmp.c_str());
    return Status::Err(err, "write " + path + ": " + strerror(err));
  }
  return Status::OK();
}

}  // namespace

Result<ChangesPlan> PlanRound(const std::string& file, Side* src, const std::string& identity) {
  ChangesPlan plan;
  ChangeFeed* feed = src->change_feed();
  if (!feed) return Status::Err(EINVAL, "--changes needs a TierFS volume as the source (META-URL:/PATH)");
  if (!feed->logging()) {
    plan.why_full = "the source volume keeps no change log (`tierfs config META-URL --changelog-hours N`)";
  }
  ASSIGN_OR_RETURN(auto bounds, feed->Bounds());
  plan.head = bounds.second;
  if (!plan.why_full.empty()) return plan;
  std::ifstream in(file);
  if (!in) {
    plan.why_full = "first round (" + file + " does not exist yet)";
    return plan;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("seq")) {
    return Status::Err(EIO, file + " is not a --changes file of tierfs sync (remove it to start over)");
  }
  if (j.value("volume", "") != feed->volume_uuid() || j.value("identity", "") != identity) {
    plan.why_full = file + " was written for another source, destination or options";
    return plan;
  }
  uint64_t seq = j.value("seq", uint64_t{0});
  if (seq > bounds.second) {
    plan.why_full = file + " is ahead of the volume's change log (a volume loaded from a dump?)";
    return plan;
  }
  if (seq + 1 < bounds.first) {
    plan.why_full = "the change log was trimmed past the last round (records from " + std::to_string(bounds.first) +
                    " kept, " + std::to_string(seq + 1) + " needed)";
    return plan;
  }
  plan.records = bounds.second - seq;
  bool exact = true;
  ASSIGN_OR_RETURN(plan.dirty, feed->ChangedDirs(seq + 1, bounds.second, &exact));
  if (!exact) {
    plan.why_full = "a file with several names changed (its other names' directories are not in the log)";
    plan.dirty.clear();
    return plan;
  }
  plan.incremental = true;
  return plan;
}

Status SaveRound(const std::string& file, Side* src, const std::string& identity, uint64_t head) {
  ChangeFeed* feed = src->change_feed();
  if (!feed) return Status::OK();
  nlohmann::json j = {{"volume", feed->volume_uuid()}, {"identity", identity}, {"seq", head}};
  return WriteWhole(file, j.dump() + "\n");
}

Result<bool> ChangeScope::Opens(const std::string& dir_in, Side* listed_on) {
  std::string dir = TrimKey(dir_in);
  if (dir.empty()) return !dirty_.empty();
  if (dirty_.count(dir)) return true;
  auto below = dirty_.lower_bound(dir + "/");
  if (below != dirty_.end() && below->compare(0, dir.size() + 1, dir + "/") == 0) return true;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = opens_.find(dir);
    if (it != opens_.end()) return it->second;
  }
  // Not named by the log: unchanged, unless it is a directory on one side only.
  bool on_src = true, on_dst = true;
  if (listed_on != src_) {
    ASSIGN_OR_RETURN(on_src, src_->IsDir(dir));
  }
  if (on_src && listed_on != dst_) {
    ASSIGN_OR_RETURN(on_dst, dst_->IsDir(dir));
  }
  bool open = !on_src || !on_dst;
  std::lock_guard<std::mutex> l(mu_);
  if (opens_.size() > 1000000) opens_.clear();
  opens_[dir] = open;
  return open;
}

Result<bool> ChangeScope::Covers(const std::string& key) {
  std::string dir = ParentKey(key);
  for (;;) {
    ASSIGN_OR_RETURN(bool open, Opens(dir));
    if (!open) return false;
    if (dir.empty()) return true;
    dir = ParentKey(dir);
  }
}

Result<bool> Side::IsDir(const std::string& key) {
  std::string prefix = TrimKey(key) + "/";
  ASSIGN_OR_RETURN(auto s, List(prefix, [](const Entry&) { return true; }));
  Entry e;
  ASSIGN_OR_RETURN(bool more, s->Next(&e));
  return more && e.key.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace tierfs::sync
