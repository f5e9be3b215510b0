#include "tools/bucket_owner.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "object/checksum_store.h"
#include "object/object_store.h"

namespace tierfs {

namespace {

// "VE": this engine's id (not a key of the dumped schema: a loaded copy makes its own).
const std::string kEngineIdKey = "VE";
constexpr uint64_t kSliceJump = uint64_t{1} << 40;
constexpr int64_t kRecheckNs = 60LL * 1000000000;

std::string MarkerKey(const std::string& volume) { return volume + "/owner"; }

// The marker is a plain object, readable with any tool: below the checksum layer.
ObjectStore* Raw(ObjectStore* store) {
  if (auto* sums = dynamic_cast<ChecksumStore*>(store)) return sums->inner();
  return store;
}

std::string Host() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

std::string When(int64_t ns) {
  if (ns <= 0) return "an unknown time";
  std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

Status WriteMarker(ObjectStore* store, const std::string& volume, const BucketOwner& o) {
  nlohmann::json j = {{"engine_id", o.engine_id}, {"engine", o.engine},     {"host", o.host},
                      {"claimed_ns", o.claimed_ns}, {"seen_ns", o.seen_ns}};
  return Raw(store)->Put(MarkerKey(volume), j.dump() + "\n").With("writing " + MarkerKey(volume));
}

BucketOwner Mine(KvEngine* engine, const std::string& id, int64_t claimed_ns) {
  BucketOwner o;
  o.engine_id = id;
  o.engine = engine->Describe();
  o.host = Host();
  o.seen_ns = NowNanos();
  o.claimed_ns = claimed_ns ? claimed_ns : o.seen_ns;
  return o;
}

}  // namespace

Result<std::string> EngineId(KvEngine* engine, bool create) {
  std::string id;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) -> Status {
        ASSIGN_OR_RETURN(auto v, t.Get(kEngineIdKey));
        id = v ? *v : "";
        return Status::OK();
      },
      true));
  if (!id.empty() || !create) return id;
  unsigned char raw[16];
  if (getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    return Status::Err(EIO, "no random bytes for the engine id");
  }
  std::string fresh = keys::Hex(std::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
  RETURN_IF_ERROR(engine->Txn([&](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto v, t.Get(kEngineIdKey));
    if (v) {  // made by another process meanwhile
      id = *v;
      return Status::OK();
    }
    id = fresh;
    return t.Put(kEngineIdKey, fresh);
  }));
  return id;
}

Result<std::optional<BucketOwner>> ReadBucketOwner(ObjectStore* store, const std::string& volume) {
  auto data = Raw(store)->Get(MarkerKey(volume));
  if (!data.ok()) {
    if (data.status().code() == ENOENT) return std::optional<BucketOwner>();
    return data.status().With("reading " + MarkerKey(volume));
  }
  auto j = nlohmann::json::parse(*data, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("engine_id") || !j["engine_id"].is_string()) {
    return Status::Err(EIO, MarkerKey(volume) + " (which names the metadata engine owning the bucket) is damaged; "
                                "`tierfs config META-URL --take-bucket` writes it anew for the engine in use");
  }
  BucketOwner o;
  o.engine_id = j["engine_id"].get<std::string>();
  o.engine = j.value("engine", "");
  o.host = j.value("host", "");
  o.claimed_ns = j.value("claimed_ns", int64_t{0});
  o.seen_ns = j.value("seen_ns", int64_t{0});
  return std::optional<BucketOwner>(o);
}

Result<Ownership> CheckBucketOwner(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt, bool claim,
                                   BucketOwner* other) {
  ASSIGN_OR_RETURN(std::string id, EngineId(engine, claim));
  ASSIGN_OR_RETURN(auto owner, ReadBucketOwner(store, fmt.name));
  if (owner && !id.empty() && owner->engine_id == id) {
    if (claim) {
      // A refresh that fails costs nothing but the "last used" time shown to others.
      Status st = WriteMarker(store, fmt.name, Mine(engine, id, owner->claimed_ns));
      if (!st.ok()) spdlog::warn("cannot refresh the bucket's owner marker: {}", st.ToString());
    }
    return Ownership::kOwner;
  }
  if (owner) {
    if (other) *other = *owner;
    return Ownership::kOther;
  }
  if (!claim) return Ownership::kUnowned;
  RETURN_IF_ERROR(WriteMarker(store, fmt.name, Mine(engine, id, 0)));
  return Ownership::kClaimed;
}

Status NotOwner(const BucketOwner& other, const FormatRecord& fmt, const std::string& meta_url,
                const std::string& action) {
  return Status::Err(
      EPERM, action + " refused: the objects of volume " + fmt.name + " in " + fmt.storage + " " + fmt.bucket +
                 " belong to another metadata engine (" + (other.engine.empty() ? "id " + other.engine_id : other.engine) +
                 ", owner since " + When(other.claimed_ns) + ", last mounted " + When(other.seen_ns) +
                 (other.host.empty() ? "" : " on " + other.host) +
                 "); this engine holds a copy of the volume (`tierfs load`) sharing them, and must not write or delete "
                 "them. Mount it read-only, or, once the other engine is no longer used (a migration), make this "
                 "one the owner with `tierfs config " + meta_url + " --take-bucket`");
}

Result<std::optional<BucketOwner>> TakeBucket(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt) {
  ASSIGN_OR_RETURN(std::string id, EngineId(engine, true));
  ASSIGN_OR_RETURN(auto before, ReadBucketOwner(store, fmt.name));
  if (before && before->engine_id == id) return before;  // already ours: nothing moves
  if (before) RETURN_IF_ERROR(engine->Txn([&](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto v, t.Get(keys::Counter("nextSlice")));
    uint64_t next = v ? keys::DecodeU64(*v) : 1;
    return t.Put(keys::Counter("nextSlice"), keys::EncodeU64(next + kSliceJump));
  }));
  RETURN_IF_ERROR(WriteMarker(store, fmt.name, Mine(engine, id, 0)));
  return before;
}

OwnerGuard::OwnerGuard(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt, std::string engine_id)
    : engine_(engine), store_(store), volume_(fmt.name), engine_id_(std::move(engine_id)) {
  checked_mono_ns_ = MonoNanos();
}

Status OwnerGuard::CheckDelete() {
  std::lock_guard<std::mutex> l(mu_);
  if (MonoNanos() - checked_mono_ns_ >= kRecheckNs) {
    checked_mono_ns_ = MonoNanos();
    auto owner = ReadBucketOwner(store_, volume_);
    if (owner.ok() && *owner && (*owner)->engine_id != engine_id_) {
      if (owner_) {
        spdlog::error("the objects of volume {} now belong to another metadata engine ({}, since {}); this client "
                      "({}) deletes no more objects: stop using this engine",
                      volume_, (*owner)->engine, When((*owner)->claimed_ns), engine_->Describe());
      }
      owner_ = false;
      other_ = **owner;
    } else if (owner.ok()) {
      owner_ = true;
    }
  }
  if (owner_) return Status::OK();
  return Status::Err(EPERM, "not deleted: the objects of volume " + volume_ + " belong to another metadata engine (" +
                                other_.engine + ")");
}

}  // namespace tierfs
