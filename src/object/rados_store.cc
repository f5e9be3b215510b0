#include "object/rados_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

// librados.hpp is not warning-clean under -Wall -Wextra; it is included here only, so that
// no other translation unit depends on it. (clang 14 rejects librados 16's buffer.h as C++20
// because of an ambiguous reversed operator==; this file also compiles as C++17, which is
// how a clang build can take it.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
#include <rados/librados.hpp>
#pragma GCC diagnostic pop

#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/clock.h"

namespace tierfs {
namespace {

// Multipart uploads live in their own namespace of the pool, so List never shows them and
// their names cannot collide with keys.
constexpr char kMultipartNamespace[] = "tierfs.multipart";
constexpr char kMarkerKeyAttr[] = "key";
constexpr char kMarkerPartAttrPrefix[] = "part.";
constexpr char kAssembledSuffix[] = "/all";
constexpr size_t kUploadIdLen = 32;

// Objects returned by one object_list call while building a listing snapshot.
constexpr size_t kListChunk = 1000;
// Stats in flight while filling in the sizes and mtimes of a page.
constexpr size_t kStatWindow = 64;
// Keys stat'ed per round of a List call (a page never needs more unless objects vanished).
constexpr size_t kStatBatch = 1000;
// A snapshot not used for this long is stale: a later call rebuilds it.
constexpr int64_t kSnapshotIdleNs = 300LL * 1000000000LL;
// Distinct prefixes whose snapshots are kept at once.
constexpr size_t kMaxSnapshots = 4;

struct Timeout {
  const char* option;
  double ceph_default;  // the value Ceph uses when nothing sets it
  int ours;  // seconds; 0: the store's io timeout (StorageSpec::io_timeout_s)
};
// See rados_store.h for the reasons behind the values.
constexpr Timeout kTimeouts[] = {
    {"client_mount_timeout", 300, 10},
    {"rados_mon_op_timeout", 0, 30},
    {"rados_osd_op_timeout", 0, 0},
};

bool HasPrefix(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

std::string ErrnoText(int err) { return std::strerror(err < 0 ? -err : err); }

// 32 hex digits for upload ids and probe names; collisions are caught by exclusive create.
std::string RandomHex() {
  std::mt19937_64& rng = ThreadRng();  // seeded again after fork()
  char buf[kUploadIdLen + 1];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

std::string ClientName(const std::string& access_key) {
  if (access_key.empty()) return "client.admin";
  if (HasPrefix(access_key, "client.")) return access_key;
  return "client." + access_key;
}

int64_t ToNanos(const timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec; }

// A bufferlist owning one copy of the parts. The copy is deliberate: an operation that times
// out (rados_osd_op_timeout) returns while its message may still sit in the messenger's
// send queue, so a bufferlist pointing into the caller's memory could be read after the
// caller freed it. One copy into librados-owned memory is cheap next to the network.
librados::bufferlist CopyToBufferlist(const std::vector<std::string_view>& parts) {
  size_t total = 0;
  for (auto p : parts) total += p.size();
  librados::bufferlist bl;
  if (total > 0) bl.reserve(total);
  for (auto p : parts) {
    if (!p.empty()) bl.append(p.data(), static_cast<unsigned>(p.size()));
  }
  return bl;
}

std::string BufferlistToString(librados::bufferlist& bl) {
  std::string out(bl.length(), '\0');
  if (!out.empty()) bl.begin().copy(bl.length(), out.data());
  return out;
}

bool IsPermissionError(int err) { return err == EACCES || err == EPERM; }

// What the store was configured with, after defaults.
struct Settings {
  std::string pool;
  std::string client;
  std::string conf;  // as given; "" = $CEPH_CONF or Ceph's search path
  int io_timeout_s = kDefaultIoTimeoutS;  // an operation's limit (rados_osd_op_timeout)

  // How messages name the configuration.
  std::string ConfDescription() const {
    if (!conf.empty()) return conf;
    const char* env = std::getenv("CEPH_CONF");
    if (env != nullptr && *env != '\0') return std::string(env) + " ($CEPH_CONF)";
    return "the default ceph.conf (/etc/ceph/ceph.conf, ~/.ceph/config, ./ceph.conf)";
  }
};

// Lowers Ceph's timeouts to ours unless the configuration chose its own value.
// librados offers no way to set a default below the configuration file (conf_set overrides
// it), so a value still equal to Ceph's default is taken to mean "not configured".
void ApplyTimeouts(librados::Rados* cluster, int io_timeout_s) {
  for (const Timeout& t : kTimeouts) {
    std::string value;
    if (cluster->conf_get(t.option, value) != 0) continue;
    if (std::strtod(value.c_str(), nullptr) != t.ceph_default) continue;
    int secs = t.ours == 0 ? io_timeout_s : std::min(t.ours, io_timeout_s);
    // Whole seconds: the options are parsed as durations, which reject "10.000000".
    std::string ours = std::to_string(static_cast<long>(secs));
    if (cluster->conf_set(t.option, ours.c_str()) != 0) {
      spdlog::warn("cannot set Ceph option {} to {}", t.option, ours);
    }
  }
}

double ConfSeconds(librados::Rados* cluster, const char* option) {
  std::string value;
  if (cluster->conf_get(option, value) != 0) return 0;
  return std::strtod(value.c_str(), nullptr);
}

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

// Creates, configures and connects a cluster handle.
Result<std::unique_ptr<librados::Rados>> ConnectCluster(const Settings& s) {
  auto cluster = std::make_unique<librados::Rados>();
  int r = cluster->init2(s.client.c_str(), "ceph", 0);
  if (r < 0) {
    return Status::Err(EIO, "cannot set up a Ceph client named " + s.client + ": " + ErrnoText(r) +
                                " (client names look like client.admin)");
  }
  r = cluster->conf_read_file(s.conf.empty() ? nullptr : s.conf.c_str());
  if (r < 0) {
    return Status::Err(EIO, "cannot read the Ceph configuration " + s.ConfDescription() + ": " + ErrnoText(r) +
                                " (give its path with --ceph-conf or $CEPH_CONF)");
  }
  r = cluster->conf_parse_env(nullptr);  // CEPH_ARGS, as the ceph tools do
  if (r < 0) return Status::Err(EIO, "cannot parse $CEPH_ARGS: " + ErrnoText(r));
  ApplyTimeouts(cluster.get(), s.io_timeout_s);
  r = cluster->connect();
  if (r < 0) {
    std::string msg = "cannot connect to the Ceph cluster described by " + s.ConfDescription() + " as " +
                      s.client + ": " + ErrnoText(r);
    if (r == -ETIMEDOUT) {
      msg += " (no monitor answered within " + FormatSeconds(ConfSeconds(cluster.get(), "client_mount_timeout")) +
             "; check mon_host in the configuration and that the monitors are up)";
    }
    if (IsPermissionError(-r)) {
      return Status::Err(EACCES, msg + " (check the keyring of " + s.client + ")");
    }
    return Status::Err(EIO, msg);
  }
  return cluster;
}

// Runs f, turning any exception librados (or an allocation) throws into EIO, so none
// crosses the module boundary.
// op and subject name what failed ("put", "object K in rados://P").
template <typename F>
auto Guarded(const char* op, const std::string& subject, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::Err(EIO, std::string("unexpected failure in ") + op + " of " + subject + ": " + e.what());
  } catch (...) {
    return Status::Err(EIO, std::string("unexpected failure in ") + op + " of " + subject);
  }
}

// Sorted keys of one listing pass; see SnapshotCache.
struct Snapshot {
  std::vector<std::string> keys;
  int64_t last_used_ns = 0;  // MonoNanos; guarded by the cache's mutex
};

// Listing snapshots by prefix. gc pages through a bucket with start_after = the last key of
// the previous page; RADOS can only enumerate a whole pool in hash order, so answering each
// page by itself would cost a full pool listing per page (quadratic). Instead a pass starts
// (start_after empty) with one full listing, sorted, and later pages binary-search it.
// Trade-off: a pass does not see objects created after it started, and holds the keys in
// memory (tens of bytes per object). A continuing call that finds no fresh snapshot (idle
// for kSnapshotIdleNs, evicted, or another process) simply builds one; results stay correct,
// only slower. A pass that reaches its end drops its snapshot.
class SnapshotCache {
 public:
  std::shared_ptr<Snapshot> Find(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(prefix);
    if (it == map_.end()) return nullptr;
    int64_t now = MonoNanos();
    if (now - it->second->last_used_ns > kSnapshotIdleNs) {
      map_.erase(it);
      return nullptr;
    }
    it->second->last_used_ns = now;
    return it->second;
  }

  void Put(const std::string& prefix, std::shared_ptr<Snapshot> snap) {
    std::lock_guard<std::mutex> lock(mu_);
    snap->last_used_ns = MonoNanos();
    map_[prefix] = std::move(snap);
    while (map_.size() > kMaxSnapshots) {
      auto oldest = std::min_element(map_.begin(), map_.end(), [](const auto& a, const auto& b) {
        return a.second->last_used_ns < b.second->last_used_ns;
      });
      map_.erase(oldest);
    }
  }

  // Drops the snapshot of prefix if it is still snap (a newer pass may have replaced it).
  void Drop(const std::string& prefix, const std::shared_ptr<Snapshot>& snap) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(prefix);
    if (it != map_.end() && it->second == snap) map_.erase(it);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Snapshot>> map_;
};

// Stats of a batch of objects, kStatWindow in flight at a time. Waits for everything it
// started before it is destroyed, because librados writes into its members.
class BatchStat {
 public:
  struct Item {
    int r = 0;
    uint64_t size = 0;
    timespec mtime{};
    // Kept alive until the completion fires (librados fills size and mtime then).
    librados::ObjectReadOperation op;
    librados::bufferlist unused;
    librados::AioCompletion* c = nullptr;
  };

  BatchStat(librados::IoCtx* io, const std::vector<std::string>& keys, size_t begin, size_t end)
      : io_(io), keys_(keys), begin_(begin), items_(end - begin) {}
  ~BatchStat() {
    for (Item& it : items_) Finish(&it);
  }
  BatchStat(const BatchStat&) = delete;
  BatchStat& operator=(const BatchStat&) = delete;

  // Results in key order.
  std::vector<Item>& Run() {
    for (size_t i = 0; i < items_.size(); ++i) {
      if (i >= kStatWindow) Finish(&items_[i - kStatWindow]);
      Item& it = items_[i];
      // IoCtx::aio_stat2 is declared but missing from librados 16; a read operation with
      // stat2 does the same.
      it.op.stat2(&it.size, &it.mtime, nullptr);
      it.c = librados::Rados::aio_create_completion();
      it.r = io_->aio_operate(keys_[begin_ + i], it.c, &it.op, &it.unused);
      if (it.r < 0) {
        it.c->release();
        it.c = nullptr;
      }
    }
    for (Item& it : items_) Finish(&it);
    return items_;
  }

 private:
  static void Finish(Item* it) {
    if (it->c == nullptr) return;
    it->c->wait_for_complete();
    it->r = it->c->get_return_value();
    it->c->release();
    it->c = nullptr;
  }

  librados::IoCtx* io_;
  const std::vector<std::string>& keys_;
  size_t begin_;
  std::vector<Item> items_;
};

class RadosStore : public ObjectStore {
 public:
  explicit RadosStore(Settings s) : s_(std::move(s)) {}
  ~RadosStore() override {
    // I/O contexts must go before the cluster handle they belong to.
    handles_.reset();
    cluster_.reset();
  }
  RadosStore(const RadosStore&) = delete;
  RadosStore& operator=(const RadosStore&) = delete;

  std::string Describe() const override {
    return "rados://" + s_.pool + (s_.conf.empty() ? "" : "?conf=" + s_.conf);
  }

  Status Init() override {
    return Guarded("Init", Describe(), [&]() -> Status {
      ASSIGN_OR_RETURN(Handles * h, Open(/*create_pool=*/true));
      std::string probe = ".tierfs-probe-" + RandomHex();
      librados::bufferlist bl;
      bl.append("probe");
      int r = h->data.write_full(probe, bl);
      if (r < 0) {
        std::string msg = "cannot write to pool " + s_.pool + " as " + s_.client + ": " + ErrnoText(r);
        if (IsPermissionError(-r)) {
          return Status::Err(EACCES, msg + " (the client needs caps 'osd allow rw pool=" + s_.pool + "')");
        }
        return Status::Err(EIO, msg);
      }
      r = h->data.remove(probe);
      if (r < 0 && r != -ENOENT) {
        return Error("remove probe", probe, r);
      }
      return Status::OK();
    });
  }

  Status Put(const std::string& key, std::string_view data) override { return PutParts(key, {data}); }

  Status PutParts(const std::string& key, const std::vector<std::string_view>& parts) override {
    RETURN_IF_ERROR(ValidateKey(key));
    return Guarded("Put", key, [&]() -> Status {
      size_t total = 0;
      for (auto p : parts) total += p.size();
      if (total > UINT32_MAX) {
        return Status::Err(EINVAL, "object " + key + " is too large for one RADOS write (" + std::to_string(total) +
                                       " bytes); use multipart");
      }
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      librados::bufferlist bl = CopyToBufferlist(parts);
      int r = h->data.write_full(key, bl);
      if (r < 0) return Error("write", key, r);
      return Status::OK();
    });
  }

  Result<std::string> Get(const std::string& key, uint64_t off, int64_t len) override {
    RETURN_IF_ERROR(ValidateKey(key));
    return Guarded("Get", key, [&]() -> Result<std::string> {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      if (len == 0) {
        // RADOS reads "length 0" as "to the end"; only existence matters here.
        uint64_t size;
        timespec mtime;
        int r = h->data.stat2(key, &size, &mtime);
        if (r < 0) return Error("read", key, r, /*missing_is_enoent=*/true);
        return std::string();
      }
      librados::bufferlist bl;
      int r = h->data.read(key, bl, len < 0 ? 0 : static_cast<size_t>(len), off);
      if (r < 0) return Error("read", key, r, /*missing_is_enoent=*/true);
      return BufferlistToString(bl);
    });
  }

  Result<ObjectInfo> Head(const std::string& key) override {
    RETURN_IF_ERROR(ValidateKey(key));
    return Guarded("Head", key, [&]() -> Result<ObjectInfo> {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      ObjectInfo info;
      info.key = key;
      timespec mtime{};
      int r = h->data.stat2(key, &info.size, &mtime);
      if (r < 0) return Error("stat", key, r, /*missing_is_enoent=*/true);
      info.mtime_ns = ToNanos(mtime);
      return info;
    });
  }

  Status Delete(const std::string& key) override {
    RETURN_IF_ERROR(ValidateKey(key));
    return Guarded("Delete", key, [&]() -> Status {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      int r = h->data.remove(key);
      if (r < 0 && r != -ENOENT) return Error("delete", key, r);
      return Status::OK();
    });
  }

  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override {
    return Guarded("List", Describe(), [&]() -> Result<std::vector<ObjectInfo>> {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      std::shared_ptr<Snapshot> snap;
      if (!start_after.empty()) snap = snapshots_.Find(prefix);
      if (snap == nullptr) {
        ASSIGN_OR_RETURN(snap, BuildSnapshot(h, prefix));
        snapshots_.Put(prefix, snap);
      }
      const std::vector<std::string>& keys = snap->keys;
      size_t pos = static_cast<size_t>(std::upper_bound(keys.begin(), keys.end(), start_after) - keys.begin());
      size_t want = limit == 0 ? SIZE_MAX : limit;
      std::vector<ObjectInfo> out;
      // Stat in rounds: keys deleted since the snapshot drop out, and the page is topped up
      // from the following keys so that a short page still means "nothing more".
      while (out.size() < want && pos < keys.size()) {
        size_t n = std::min({want - out.size(), kStatBatch, keys.size() - pos});
        BatchStat batch(&h->data, keys, pos, pos + n);
        std::vector<BatchStat::Item>& items = batch.Run();
        for (size_t i = 0; i < n; ++i) {
          if (items[i].r == -ENOENT) continue;
          if (items[i].r < 0) return Error("stat", keys[pos + i], items[i].r);
          out.push_back({keys[pos + i], items[i].size, ToNanos(items[i].mtime), ""});
        }
        pos += n;
      }
      if (out.empty()) snapshots_.Drop(prefix, snap);  // the pass is over
      return out;
    });
  }

  Result<std::string> CreateMultipart(const std::string& key) override {
    RETURN_IF_ERROR(ValidateKey(key));
    return Guarded("CreateMultipart", key, [&]() -> Result<std::string> {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      for (int attempt = 0; attempt < 8; ++attempt) {
        std::string id = RandomHex();
        librados::ObjectWriteOperation op;
        op.create(/*exclusive=*/true);
        librados::bufferlist k;
        k.append(key);
        op.setxattr(kMarkerKeyAttr, k);
        int r = h->multipart.operate(id, &op);
        if (r == -EEXIST) continue;
        if (r < 0) return Error("start multipart upload of", key, r);
        return id;
      }
      return Status::Err(EIO, "cannot start multipart upload of " + key + " in " + Describe() +
                                  ": no free upload id after 8 attempts");
    });
  }

  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override {
    RETURN_IF_ERROR(ValidateKey(key));
    RETURN_IF_ERROR(ValidateUpload(key, upload_id));
    if (part_num < 1) {
      return Status::Err(EINVAL, "invalid part number " + std::to_string(part_num) + " for object " + key +
                                     ": parts are numbered from 1");
    }
    if (data.size() > UINT32_MAX) {
      return Status::Err(EINVAL, "part " + std::to_string(part_num) + " of object " + key + " is too large");
    }
    return Guarded("UploadPart", key, [&]() -> Status {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      // Record the part on the marker first, atomically checking that the upload exists
      // and belongs to key, so that Abort and Complete know every part to remove.
      librados::ObjectWriteOperation op;
      op.assert_exists();
      librados::bufferlist k;
      k.append(key);
      op.cmpxattr(kMarkerKeyAttr, LIBRADOS_CMPXATTR_OP_EQ, k);
      op.setxattr((kMarkerPartAttrPrefix + std::to_string(part_num)).c_str(), librados::bufferlist());
      int r = h->multipart.operate(upload_id, &op);
      if (r == -ENOENT || r == -ENODATA) return UploadNotFound(key, upload_id);
      if (r == -ECANCELED) return NotOurUpload(key, upload_id);
      if (r < 0) return Error("upload part " + std::to_string(part_num) + " of", key, r);
      librados::bufferlist bl = CopyToBufferlist({data});
      r = h->multipart.write_full(PartName(upload_id, part_num), bl);
      if (r < 0) return Error("upload part " + std::to_string(part_num) + " of", key, r);
      return Status::OK();
    });
  }

  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override {
    RETURN_IF_ERROR(ValidateKey(key));
    RETURN_IF_ERROR(ValidateUpload(key, upload_id));
    if (parts < 1) {
      return Status::Err(EINVAL, "cannot complete multipart upload of object " + key + " with " +
                                     std::to_string(parts) + " parts");
    }
    return Guarded("CompleteMultipart", key, [&]() -> Status {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      ASSIGN_OR_RETURN(std::set<int> uploaded, UploadedParts(h, key, upload_id));
      for (int n = 1; n <= parts; ++n) {
        if (!uploaded.count(n)) return PartMissing(key, upload_id, n);
      }
      // Concatenate into a fresh object (so that its mtime is now, not when part 1 was
      // uploaded), one part in memory at a time, then copy it onto key in one atomic step.
      const std::string assembled = upload_id + kAssembledSuffix;
      uint64_t off = 0;
      for (int n = 1; n <= parts; ++n) {
        librados::bufferlist bl;
        int r = h->multipart.read(PartName(upload_id, n), bl, 0, 0);
        if (r == -ENOENT) return PartMissing(key, upload_id, n);
        if (r < 0) return Error("read part " + std::to_string(n) + " of", key, r);
        unsigned len = bl.length();
        r = n == 1 ? h->multipart.write_full(assembled, bl) : h->multipart.write(assembled, bl, len, off);
        if (r < 0) return Error("assemble", key, r);
        off += len;
      }
      librados::ObjectWriteOperation op;
      op.copy_from(assembled, h->multipart, /*src_version=*/0, /*src_fadvise_flags=*/0);
      int r = h->data.operate(key, &op);
      if (r < 0) return Error("write", key, r);
      // The object is complete; failing to clean up only leaves garbage behind.
      Status cleanup = RemoveUpload(h, upload_id, uploaded);
      if (!cleanup.ok()) spdlog::warn("multipart upload of {} completed but {}", key, cleanup.message());
      return Status::OK();
    });
  }

  Status AbortMultipart(const std::string& key, const std::string& upload_id) override {
    RETURN_IF_ERROR(ValidateKey(key));
    RETURN_IF_ERROR(ValidateUpload(key, upload_id));
    return Guarded("AbortMultipart", key, [&]() -> Status {
      ASSIGN_OR_RETURN(Handles * h, Open(false));
      auto uploaded = UploadedParts(h, key, upload_id);
      if (!uploaded.ok()) {
        if (uploaded.status().code() == ENOENT) return Status::OK();  // already gone
        return uploaded.status();
      }
      return RemoveUpload(h, upload_id, *uploaded);
    });
  }

 private:
  struct Handles {
    librados::IoCtx data;       // the pool's default namespace: the objects
    librados::IoCtx multipart;  // kMultipartNamespace
  };

  // The connected handles, connecting (and, for Init, creating the pool) on first use.
  // After success the handles never change, so the fast path is one atomic load.
  Result<Handles*> Open(bool create_pool) {
    Handles* h = ready_.load(std::memory_order_acquire);
    if (h != nullptr) return h;
    const int64_t waiting_since = MonoNanos();
    std::lock_guard<std::mutex> lock(open_mu_);
    h = ready_.load(std::memory_order_acquire);
    if (h != nullptr) return h;
    if (cluster_ == nullptr) {
      // Callers that queued behind a failed attempt share its error: trying again one after
      // another would make the n-th caller wait n connect timeouts.
      if (connect_failed_at_ >= waiting_since) return connect_error_;
      auto cluster = ConnectCluster(s_);
      if (!cluster.ok()) {
        connect_error_ = cluster.status();
        connect_failed_at_ = MonoNanos();
        return connect_error_;
      }
      cluster_ = std::move(cluster).value();
    }
    int64_t id = cluster_->pool_lookup(s_.pool.c_str());
    if (id == -ENOENT && create_pool) {
      RETURN_IF_ERROR(CreatePool());
      id = cluster_->pool_lookup(s_.pool.c_str());
    }
    if (id == -ENOENT) {
      // Outside Init this is EIO: a caller must not take an unusable pool for a missing object.
      return Status::Err(create_pool ? ENOENT : EIO,
                         "pool " + s_.pool + " does not exist in the Ceph cluster described by " +
                             s_.ConfDescription() + " (create it with: ceph osd pool create " + s_.pool + ")");
    }
    if (id < 0) {
      return Status::Err(EIO, "cannot look up pool " + s_.pool + ": " + ErrnoText(static_cast<int>(id)));
    }
    auto handles = std::make_unique<Handles>();
    int r = cluster_->ioctx_create2(id, handles->data);
    if (r == 0) r = cluster_->ioctx_create2(id, handles->multipart);
    if (r < 0) return Status::Err(EIO, "cannot open pool " + s_.pool + ": " + ErrnoText(r));
    handles->multipart.set_namespace(kMultipartNamespace);
    handles_ = std::move(handles);
    ready_.store(handles_.get(), std::memory_order_release);
    return handles_.get();
  }

  // Called with open_mu_ held.
  Status CreatePool() {
    int r = cluster_->pool_create(s_.pool.c_str());
    if (r == -EEXIST) return Status::OK();  // created concurrently
    if (IsPermissionError(-r)) {
      return Status::Err(ENOENT, "pool " + s_.pool + " does not exist in the Ceph cluster described by " +
                                     s_.ConfDescription() + ", and " + s_.client + " may not create it (" +
                                     ErrnoText(r) + "); create it with: ceph osd pool create " + s_.pool);
    }
    if (r < 0) return Status::Err(EIO, "cannot create pool " + s_.pool + ": " + ErrnoText(r));
    spdlog::info("created Ceph pool {}", s_.pool);
    // Tag the pool so that the cluster does not warn about a pool without an application.
    librados::IoCtx io;
    if (cluster_->ioctx_create(s_.pool.c_str(), io) == 0) {
      int e = io.application_enable("rados", false);
      if (e < 0) spdlog::warn("cannot tag pool {} with application rados: {}", s_.pool, ErrnoText(e));
    }
    return Status::OK();
  }

  Result<std::shared_ptr<Snapshot>> BuildSnapshot(Handles* h, const std::string& prefix) {
    auto snap = std::make_shared<Snapshot>();
    // ObjectCursor's copy assignment leaks the cursor it overwrites (librados 16), so the
    // cursor is advanced by destroying and copy-constructing it instead.
    std::optional<librados::ObjectCursor> cursor(h->data.object_list_begin());
    const librados::ObjectCursor end = h->data.object_list_end();
    const librados::bufferlist no_filter;
    while (!h->data.object_list_is_end(*cursor)) {
      std::vector<librados::ObjectItem> items;
      librados::ObjectCursor next;
      int r = h->data.object_list(*cursor, end, kListChunk, no_filter, &items, &next);
      if (r < 0) return Status::Err(r == -EPERM || r == -EACCES ? EACCES : EIO,
                                    "cannot list pool " + s_.pool + ": " + ErrnoText(r));
      for (librados::ObjectItem& item : items) {
        if (item.nspace.empty() && HasPrefix(item.oid, prefix)) snap->keys.push_back(std::move(item.oid));
      }
      cursor.emplace(next);
    }
    std::sort(snap->keys.begin(), snap->keys.end());
    // A listing racing with placement-group splits may return an object twice.
    snap->keys.erase(std::unique(snap->keys.begin(), snap->keys.end()), snap->keys.end());
    return snap;
  }

  // The part numbers recorded on the marker of upload_id; ENOENT when the upload does not
  // exist, EINVAL when it belongs to another key.
  Result<std::set<int>> UploadedParts(Handles* h, const std::string& key, const std::string& upload_id) {
    std::map<std::string, librados::bufferlist> attrs;
    int r = h->multipart.getxattrs(upload_id, attrs);
    if (r == -ENOENT) return UploadNotFound(key, upload_id);
    if (r < 0) return Error("read multipart upload " + upload_id + " of", key, r);
    auto it = attrs.find(kMarkerKeyAttr);
    if (it == attrs.end() || BufferlistToString(it->second) != key) {
      return NotOurUpload(key, upload_id);
    }
    std::set<int> parts;
    const std::string prefix = kMarkerPartAttrPrefix;
    for (const auto& [name, value] : attrs) {
      if (HasPrefix(name, prefix)) parts.insert(std::atoi(name.c_str() + prefix.size()));
    }
    return parts;
  }

  // Removes the marker first, so that a concurrent UploadPart fails instead of adding a part
  // nobody will remove, then the parts and the assembled object.
  Status RemoveUpload(Handles* h, const std::string& upload_id, const std::set<int>& parts) {
    Status first;
    auto remove = [&](const std::string& name) {
      int r = h->multipart.remove(name);
      if (r < 0 && r != -ENOENT && first.ok()) {
        first = Status::Err(EIO, "cannot remove " + name + " of multipart upload " + upload_id + " in " +
                                     Describe() + ": " + ErrnoText(r));
      }
    };
    remove(upload_id);
    for (int n : parts) remove(PartName(upload_id, n));
    remove(upload_id + kAssembledSuffix);
    return first;
  }

  static std::string PartName(const std::string& upload_id, int n) { return upload_id + "/" + std::to_string(n); }

  Status UploadNotFound(const std::string& key, const std::string& upload_id) const {
    return Status::Err(ENOENT, "multipart upload " + upload_id + " of object " + key + " not found in " +
                                   Describe() + " (already completed or aborted?)");
  }

  Status NotOurUpload(const std::string& key, const std::string& upload_id) const {
    return Status::Err(EINVAL, "multipart upload " + upload_id + " in " + Describe() +
                                   " does not belong to object " + key);
  }

  Status PartMissing(const std::string& key, const std::string& upload_id, int n) const {
    return Status::Err(EINVAL, "part " + std::to_string(n) + " of multipart upload " + upload_id + " of object " +
                                   key + " was never uploaded");
  }

  Status ValidateKey(const std::string& key) const {
    if (key.empty()) return Status::Err(EINVAL, "invalid object key: the key is empty");
    if (key.find('\0') != std::string::npos) {
      return Status::Err(EINVAL, "invalid object key '" + key + "': the key contains a NUL byte");
    }
    return Status::OK();
  }

  Status ValidateUpload(const std::string& key, const std::string& upload_id) const {
    bool hex = upload_id.size() == kUploadIdLen &&
               std::all_of(upload_id.begin(), upload_id.end(),
                           [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (!hex) return Status::Err(EINVAL, "invalid multipart upload id '" + upload_id + "' for object " + key);
    return Status::OK();
  }

  // Maps a librados error (negative errno) on key to the store's codes. ENOENT stays ENOENT
  // only where it means the object is missing; elsewhere (a write) it means the pool went
  // away and is EIO.
  Status Error(const std::string& what, const std::string& key, int r, bool missing_is_enoent = false) const {
    int err = -r;
    if (err == ENOENT && missing_is_enoent) {
      return Status::Err(ENOENT, "object " + key + " not found in pool " + s_.pool);
    }
    std::string msg = "cannot " + what + " object " + key + " in pool " + s_.pool + ": " + ErrnoText(err);
    if (IsPermissionError(err)) {
      return Status::Err(EACCES, msg + " (" + s_.client + " needs caps 'osd allow rw pool=" + s_.pool + "')");
    }
    if (err == ETIMEDOUT) msg += " (the cluster did not answer in time; is it healthy? see ceph -s)";
    return Status::Err(EIO, msg);
  }

  const Settings s_;
  std::mutex open_mu_;                          // serializes connecting
  std::unique_ptr<librados::Rados> cluster_;    // guarded by open_mu_ until ready_ is set
  Status connect_error_;                        // the last failed attempt; guarded by open_mu_
  int64_t connect_failed_at_ = -1;              // MonoNanos of it; guarded by open_mu_
  std::unique_ptr<Handles> handles_;            // set once, with ready_
  std::atomic<Handles*> ready_{nullptr};
  SnapshotCache snapshots_;
};

Result<Settings> MakeSettings(const StorageSpec& spec) {
  if (spec.bucket.empty()) {
    return Status::Err(EINVAL, "rados storage needs a pool name as the bucket (for example --bucket tierfs)");
  }
  Settings s;
  s.pool = spec.bucket;
  s.client = ClientName(spec.access_key);
  s.conf = spec.ceph_conf;
  if (spec.io_timeout_s > 0) s.io_timeout_s = spec.io_timeout_s;
  return s;
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> NewRadosStore(const StorageSpec& spec) {
  ASSIGN_OR_RETURN(Settings s, MakeSettings(spec));
  return std::unique_ptr<ObjectStore>(std::make_unique<RadosStore>(std::move(s)));
}

Status DeleteRadosPool(const StorageSpec& spec) {
  ASSIGN_OR_RETURN(Settings s, MakeSettings(spec));
  return Guarded("DeleteRadosPool", s.pool, [&]() -> Status {
    ASSIGN_OR_RETURN(std::unique_ptr<librados::Rados> cluster, ConnectCluster(s));
    int r = cluster->pool_delete(s.pool.c_str());
    if (r < 0 && r != -ENOENT) {
      return Status::Err(IsPermissionError(-r) ? EACCES : EIO,
                         "cannot delete pool " + s.pool + ": " + ErrnoText(r) +
                             " (the monitors need mon_allow_pool_delete = true)");
    }
    return Status::OK();
  });
}

}  // namespace tierfs
