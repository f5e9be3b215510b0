#include "object/mem_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"

namespace tierfs {

MemStore::MemStore(std::string name) : name_(std::move(name)) {}

MemStore::~MemStore() = default;

std::string MemStore::Describe() const { return "mem://" + name_ + "/"; }

Status MemStore::Init() { return Status::OK(); }

int MemStore::TakeFault(Fault* fault) {
  if (fault->err == 0 || fault->times == 0) return 0;
  if (fault->times > 0 && --fault->times == 0) {
    int err = fault->err;
    fault->err = 0;
    return err;
  }
  return fault->err;
}

Status MemStore::Injected(const char* op, const std::string& key, int err) const {
  return Status::Err(err, std::string("injected failure: ") + op + " of object " + key + " in " + Describe() +
                              ": " + std::strerror(err));
}

void MemStore::FailPuts(int err, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  put_fault_ = {err, err == 0 ? 0 : times};
}

void MemStore::FailGets(int err, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  get_fault_ = {err, err == 0 ? 0 : times};
}

void MemStore::FailDeletes(int err, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  delete_fault_ = {err, err == 0 ? 0 : times};
}

void MemStore::SetGetHook(std::function<void(const std::string& key)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  get_hook_ = std::move(hook);
}

void MemStore::SetPutHook(std::function<void(const std::string& key)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  put_hook_ = std::move(hook);
}

void MemStore::ResetCounters() {
  puts_ = 0;
  gets_ = 0;
  heads_ = 0;
  deletes_ = 0;
  lists_ = 0;
}

size_t MemStore::ObjectCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.size();
}

uint64_t MemStore::TotalBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& [key, obj] : objects_) total += obj.data.size();
  return total;
}

Status MemStore::Put(const std::string& key, std::string_view data) { return PutWithMeta(key, data, ""); }

Status MemStore::PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) {
  ++puts_;
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = put_hook_;
  }
  if (hook) hook(key);
  // Copy outside the lock: objects can be megabytes.
  Object obj{std::string(data), NowNanos(), meta};
  std::lock_guard<std::mutex> lock(mu_);
  if (int err = TakeFault(&put_fault_)) return Injected("put", key, err);
  objects_[key] = std::move(obj);
  return Status::OK();
}

Result<std::string> MemStore::Get(const std::string& key, uint64_t off, int64_t len) {
  return GetWithMeta(key, off, len, nullptr);
}

Result<std::string> MemStore::GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) {
  ++gets_;
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = get_hook_;
  }
  if (hook) hook(key);
  std::lock_guard<std::mutex> lock(mu_);
  if (int err = TakeFault(&get_fault_)) return Injected("get", key, err);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status::Err(ENOENT, "object " + key + " not found in " + Describe());
  const std::string& data = it->second.data;
  if (meta) *meta = it->second.meta;
  if (off >= data.size()) return std::string();
  size_t n = data.size() - off;
  if (len >= 0) n = std::min<uint64_t>(n, static_cast<uint64_t>(len));
  return data.substr(off, n);
}

Result<ObjectInfo> MemStore::Head(const std::string& key) {
  ++heads_;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status::Err(ENOENT, "object " + key + " not found in " + Describe());
  return ObjectInfo{key, it->second.data.size(), it->second.mtime_ns, ""};
}

Status MemStore::Delete(const std::string& key) {
  ++deletes_;
  std::lock_guard<std::mutex> lock(mu_);
  if (int err = TakeFault(&delete_fault_)) return Injected("delete", key, err);
  objects_.erase(key);
  return Status::OK();
}

Result<std::vector<ObjectInfo>> MemStore::List(const std::string& prefix, const std::string& start_after,
                                               size_t limit) {
  ++lists_;
  std::vector<ObjectInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = start_after < prefix ? objects_.lower_bound(prefix) : objects_.upper_bound(start_after);
  for (; it != objects_.end() && it->first.starts_with(prefix); ++it) {
    if (limit != 0 && out.size() >= limit) break;
    out.push_back({it->first, it->second.data.size(), it->second.mtime_ns, ""});
  }
  return out;
}

Result<LevelPage> MemStore::ListLevel(const std::string& prefix, const std::string& token) {
  ++lists_;
  LevelPage page;
  std::lock_guard<std::mutex> lock(mu_);
  // The token: 'o' and the last object's key, or 'p' and the last prefix.
  auto it = objects_.lower_bound(prefix);
  if (!token.empty() && token[0] == 'o') it = objects_.upper_bound(token.substr(1));
  if (!token.empty() && token[0] == 'p') {  // after prefix "a/": from "a0" ('/' + 1), past its keys
    std::string past = token.substr(1);
    past.back() = '/' + 1;
    it = objects_.lower_bound(past);
  }
  std::string last;
  for (size_t n = 0; it != objects_.end() && it->first.starts_with(prefix) && n < 1000; ++n) {
    size_t slash = it->first.find('/', prefix.size());
    if (slash == std::string::npos) {
      page.objects.push_back({it->first, it->second.data.size(), it->second.mtime_ns, ""});
      last = "o" + it->first;
      ++it;
      continue;
    }
    std::string p = it->first.substr(0, slash + 1);
    page.prefixes.push_back(p);
    last = "p" + p;
    std::string past = p;
    past.back() = '/' + 1;
    it = objects_.lower_bound(past);
  }
  if (it != objects_.end() && it->first.starts_with(prefix)) page.next_token = last;
  return page;
}

Result<std::string> MemStore::CreateMultipart(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string id = std::to_string(next_upload_++);
  uploads_[id].key = key;
  return id;
}

Status MemStore::UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                            std::string_view data) {
  if (part_num < 1) {
    return Status::Err(EINVAL, "invalid part number " + std::to_string(part_num) + " for object " + key +
                                   ": parts are numbered from 1");
  }
  std::string copy(data);
  std::lock_guard<std::mutex> lock(mu_);
  if (int err = TakeFault(&put_fault_)) return Injected("upload part", key, err);
  auto it = uploads_.find(upload_id);
  if (it == uploads_.end() || it->second.key != key) {
    return Status::Err(ENOENT, "multipart upload " + upload_id + " of object " + key + " not found in " +
                                   Describe());
  }
  it->second.parts[part_num] = std::move(copy);
  return Status::OK();
}

Status MemStore::CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) {
  std::lock_guard<std::mutex> lock(mu_);
  if (int err = TakeFault(&put_fault_)) return Injected("complete multipart upload", key, err);
  auto it = uploads_.find(upload_id);
  if (it == uploads_.end() || it->second.key != key) {
    return Status::Err(ENOENT, "multipart upload " + upload_id + " of object " + key + " not found in " +
                                   Describe());
  }
  if (parts < 1) {
    return Status::Err(EINVAL, "cannot complete multipart upload of object " + key + " with " +
                                   std::to_string(parts) + " parts");
  }
  std::string data;
  for (int n = 1; n <= parts; ++n) {
    auto part = it->second.parts.find(n);
    if (part == it->second.parts.end()) {
      return Status::Err(EINVAL, "part " + std::to_string(n) + " of multipart upload " + upload_id +
                                     " of object " + key + " was never uploaded");
    }
    data += part->second;
  }
  objects_[key] = Object{std::move(data), NowNanos(), ""};
  uploads_.erase(it);
  return Status::OK();
}

Status MemStore::AbortMultipart(const std::string& key, const std::string& upload_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = uploads_.find(upload_id);
  if (it != uploads_.end() && it->second.key == key) uploads_.erase(it);
  return Status::OK();
}

}  // namespace tierfs
