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
  ASSIGN_OR_RETURN(plan.changes, feed->Changed(seq + 1, bounds.second, &exact));
  if (!exact) {
    plan.why_full = "a file with several names changed (its other names' directories are not in the log)";
    plan.changes = SourceChanges{};
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

ChangeScope::ChangeScope(SourceChanges changes, Side* src, Side* dst)
    : c_(std::move(changes)), src_(src), dst_(dst) {
  std::map<std::string, std::set<std::string>> names;
  for (const std::string& key : c_.keys) {
    for (std::string k = key; !k.empty();) {
      std::string parent = ParentKey(k);
      if (!names[parent].insert(BaseName(k)).second) break;  // and its ancestors' already
      k = parent;
    }
  }
  for (auto& [dir, set] : names) {
    children_[dir] = std::make_shared<std::vector<std::string>>(set.begin(), set.end());
  }
}

Result<bool> ChangeScope::Opens(const std::string& dir_in, Side* listed_on) {
  std::string dir = TrimKey(dir_in);
  if (children_.count(dir)) return true;  // on the way to a change
  if (dir.empty()) return false;           // nothing changed
  return OneSided(dir, listed_on);
}

Result<NameList> ChangeScope::Children(const std::string& dir_in) {
  std::string dir = TrimKey(dir_in);
  ASSIGN_OR_RETURN(bool one, OneSided(dir, nullptr));
  if (one) return NameList();
  auto it = children_.find(dir);
  if (it == children_.end()) return NameList(std::make_shared<std::vector<std::string>>());
  return NameList(it->second);
}

Result<bool> ChangeScope::Covers(const std::string& key_in) {
  std::string key = TrimKey(key_in);
  if (c_.keys.count(key) || children_.count(key)) return true;
  for (std::string dir = ParentKey(key); !dir.empty(); dir = ParentKey(dir)) {
    ASSIGN_OR_RETURN(bool one, OneSided(dir, nullptr));
    if (one) return true;
  }
  return false;
}

Result<bool> ChangeScope::OneSided(const std::string& dir, Side* listed_on) {
  if (dir.empty()) return false;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = one_sided_.find(dir);
    if (it != one_sided_.end()) return it->second;
  }
  bool one = false;
  if (!c_.entries.count(dir)) {
    // Its entry is as the last round left it: one-sided only below a one-sided directory.
    ASSIGN_OR_RETURN(one, OneSided(ParentKey(dir), nullptr));
  } else {
    bool on_src = true, on_dst = true;
    if (listed_on != src_) {
      ASSIGN_OR_RETURN(on_src, src_->IsDir(dir));
    }
    if (on_src && listed_on != dst_) {
      ASSIGN_OR_RETURN(on_dst, dst_->IsDir(dir));
    }
    one = !on_src || !on_dst;
  }
  std::lock_guard<std::mutex> l(mu_);
  if (one_sided_.size() > 1000000) one_sided_.clear();
  one_sided_[dir] = one;
  return one;
}

Result<bool> Side::IsDir(const std::string& key) {
  std::string prefix = TrimKey(key) + "/";
  ASSIGN_OR_RETURN(auto s, List(prefix, [](const Entry&) { return true; }));
  Entry e;
  ASSIGN_OR_RETURN(bool more, s->Next(&e));
  return more && e.key.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace tierfs::sync
