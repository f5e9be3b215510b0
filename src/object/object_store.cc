#include "object/object_store.h"

#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>

#include "object/azure_store.h"
#include "object/checksum_store.h"
#include "object/file_store.h"
#include "object/mem_store.h"
#include "object/timed_store.h"
#include "object/rados_store.h"
#include "object/s3_store.h"

namespace tierfs {

Status ObjectStore::PutParts(const std::string& key, const std::vector<std::string_view>& parts) {
  std::string all;
  size_t n = 0;
  for (auto p : parts) n += p.size();
  all.reserve(n);
  for (auto p : parts) all.append(p);
  return Put(key, all);
}
Status ObjectStore::PutWithMeta(const std::string& key, std::string_view, const std::string&) {
  return Status::Err(EOPNOTSUPP, "cannot write object " + key + " with metadata: " + Describe() + " keeps none");
}

Result<std::string> ObjectStore::GetVerified(const std::string& key, std::vector<uint32_t>* sums) {
  sums->clear();
  return Get(key);
}

Result<std::string> ObjectStore::GetWithMeta(const std::string& key, uint64_t, int64_t, std::string*) {
  return Status::Err(EOPNOTSUPP, "cannot read the metadata of object " + key + ": " + Describe() + " keeps none");
}

Result<LevelPage> ObjectStore::ListLevel(const std::string& prefix, const std::string&) {
  return Status::Err(EOPNOTSUPP, "cannot list one level of " + Describe() + prefix + ": list it flat");
}

namespace {

// Forwards to a store shared by several owners: "mem" buckets are shared by name within
// the process, while ChecksumStore wants to own its inner store.
class SharedStore : public ObjectStore {
 public:
  explicit SharedStore(std::shared_ptr<ObjectStore> s) : s_(std::move(s)) {}
  std::string Describe() const override { return s_->Describe(); }
  Status Init() override { return s_->Init(); }
  Status Put(const std::string& key, std::string_view data) override { return s_->Put(key, data); }
  Result<std::string> Get(const std::string& key, uint64_t off, int64_t len) override {
    return s_->Get(key, off, len);
  }
  bool HasObjectMeta() const override { return s_->HasObjectMeta(); }
  Status PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) override {
    return s_->PutWithMeta(key, data, meta);
  }
  Result<std::string> GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) override {
    return s_->GetWithMeta(key, off, len, meta);
  }
  Result<ObjectInfo> Head(const std::string& key) override { return s_->Head(key); }
  Status Delete(const std::string& key) override { return s_->Delete(key); }
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override {
    return s_->List(prefix, start_after, limit);
  }
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override {
    return s_->ListLevel(prefix, token);
  }
  Result<std::string> CreateMultipart(const std::string& key) override { return s_->CreateMultipart(key); }
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override {
    return s_->UploadPart(key, upload_id, part_num, data);
  }
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override {
    return s_->CompleteMultipart(key, upload_id, parts);
  }
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override {
    return s_->AbortMultipart(key, upload_id);
  }
  Status Sync() override { return s_->Sync(); }
  std::optional<StoreSpace> Space() const override { return s_->Space(); }

 private:
  std::shared_ptr<ObjectStore> s_;
};

// Process-wide registry of mem buckets; they live until the process exits.
std::shared_ptr<ObjectStore> SharedMemBucket(const std::string& name) {
  static std::mutex mu;
  static auto* buckets = new std::map<std::string, std::shared_ptr<ObjectStore>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<ObjectStore>& store = (*buckets)[name];
  if (!store) store = std::make_shared<MemStore>(name);
  return store;
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> CreateRawObjectStore(const StorageSpec& spec) {
  const std::string& storage = spec.storage;
  const std::string& bucket = spec.bucket;
  if (storage == "file") {
    if (bucket.empty()) {
      return Status::Err(EINVAL, "file storage needs a bucket directory, for example /var/lib/tierfs/myvol");
    }
    std::error_code ec;
    std::filesystem::path path = std::filesystem::absolute(bucket, ec);
    if (ec) {
      return Status::Err(EINVAL, "cannot make bucket directory " + bucket + " absolute: " + ec.message());
    }
    FileStoreOptions options;
    options.fsync = spec.sync_puts;
    options.private_dir = spec.volume;
    options.min_free_ratio = spec.free_space_ratio;
    return std::unique_ptr<ObjectStore>(std::make_unique<FileStore>(path.lexically_normal().string(), options));
  }
  if (storage == "mem") return std::unique_ptr<ObjectStore>(std::make_unique<SharedStore>(SharedMemBucket(bucket)));
  if (storage == "s3") return NewS3Store(spec);
  if (storage == "rados") return NewRadosStore(spec);
  if (storage == "azure") return NewAzureStore(spec);
  return Status::Err(EINVAL, "unknown storage type " + storage + " (supported: file, mem, s3, rados, azure)");
}

Result<std::unique_ptr<ObjectStore>> CreateObjectStore(const StorageSpec& spec) {
  ASSIGN_OR_RETURN(auto inner, CreateRawObjectStore(spec));
  // Requests are counted as the backend sees them (metrics), below the checksums.
  inner = WithRequestMetrics(std::move(inner));
  bool in_meta = spec.checksums_in_meta && inner->HasObjectMeta();
  return std::unique_ptr<ObjectStore>(std::make_unique<ChecksumStore>(std::move(inner), in_meta));
}

Result<std::unique_ptr<ObjectStore>> CreateObjectStore(const std::string& storage, const std::string& bucket) {
  StorageSpec spec;
  spec.storage = storage;
  spec.bucket = bucket;
  return CreateObjectStore(spec);
}

}  // namespace tierfs
