#include "object/read_through_store.h"

namespace tierfs {
namespace {

class ReadThroughStore final : public ObjectStore {
 public:
  ReadThroughStore(std::unique_ptr<ObjectStore> first, std::unique_ptr<ObjectStore> second,
                   std::function<bool(const std::string&)> falls_through)
      : first_(std::move(first)), second_(std::move(second)), falls_through_(std::move(falls_through)) {}

  std::string Describe() const override {
    return first_->Describe() + " (reading through to " + second_->Describe() + ")";
  }
  Status Init() override { return first_->Init(); }
  Status Put(const std::string& key, std::string_view data) override { return first_->Put(key, data); }
  Status PutParts(const std::string& key, const std::vector<std::string_view>& parts) override {
    return first_->PutParts(key, parts);
  }
  Result<std::string> Get(const std::string& key, uint64_t off, int64_t len) override {
    auto r = first_->Get(key, off, len);
    if (r.ok() || r.status().code() != ENOENT || !falls_through_(key)) return r;
    return second_->Get(key, off, len);
  }
  Result<ObjectInfo> Head(const std::string& key) override {
    auto r = first_->Head(key);
    if (r.ok() || r.status().code() != ENOENT || !falls_through_(key)) return r;
    return second_->Head(key);
  }
  Status Delete(const std::string& key) override { return first_->Delete(key); }
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override {
    return first_->List(prefix, start_after, limit);
  }
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override {
    return first_->ListLevel(prefix, token);
  }
  Result<std::string> CreateMultipart(const std::string& key) override { return first_->CreateMultipart(key); }
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override {
    return first_->UploadPart(key, upload_id, part_num, data);
  }
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override {
    return first_->CompleteMultipart(key, upload_id, parts);
  }
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override {
    return first_->AbortMultipart(key, upload_id);
  }
  Status Sync() override { return first_->Sync(); }
  std::optional<StoreSpace> Space() const override { return first_->Space(); }

 private:
  std::unique_ptr<ObjectStore> first_, second_;
  std::function<bool(const std::string&)> falls_through_;
};

}  // namespace

std::unique_ptr<ObjectStore> WithReadThrough(std::unique_ptr<ObjectStore> first, std::unique_ptr<ObjectStore> second,
                                             std::function<bool(const std::string& key)> falls_through) {
  return std::make_unique<ReadThroughStore>(std::move(first), std::move(second), std::move(falls_through));
}

}  // namespace tierfs
