#include "object/read_through_store.h"

#include <spdlog/spdlog.h>

namespace tierfs {
namespace {

class ReadThroughStore final : public ObjectStore {
 public:
  ReadThroughStore(std::unique_ptr<ObjectStore> first, std::unique_ptr<ObjectStore> second,
                   std::function<bool(const std::string&)> falls_through, WriteBoth write_both)
      : first_(std::move(first)),
        second_(std::move(second)),
        falls_through_(std::move(falls_through)),
        both_(write_both == WriteBoth::kYes) {}

  std::string Describe() const override {
    return first_->Describe() + " (reading through to " + second_->Describe() + ")";
  }
  Status Init() override { return first_->Init(); }
  Status Put(const std::string& key, std::string_view data) override {
    if (!Both(key)) return first_->Put(key, data);
    RETURN_IF_ERROR(second_->Put(key, data));
    return Copied(key, first_->Put(key, data));
  }
  Status PutParts(const std::string& key, const std::vector<std::string_view>& parts) override {
    if (!Both(key)) return first_->PutParts(key, parts);
    RETURN_IF_ERROR(second_->PutParts(key, parts));
    return Copied(key, first_->PutParts(key, parts));
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
  Status Delete(const std::string& key) override {
    if (!Both(key)) return first_->Delete(key);
    RETURN_IF_ERROR(second_->Delete(key));
    Status st = first_->Delete(key);
    return st.ok() || st.code() == ENOENT ? Status::OK() : st;
  }
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override {
    return first_->List(prefix, start_after, limit);
  }
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override {
    return first_->ListLevel(prefix, token);
  }
  Result<std::string> CreateMultipart(const std::string& key) override { return Home(key)->CreateMultipart(key); }
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override {
    return Home(key)->UploadPart(key, upload_id, part_num, data);
  }
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override {
    return Home(key)->CompleteMultipart(key, upload_id, parts);
  }
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override {
    return Home(key)->AbortMultipart(key, upload_id);
  }
  Status Sync() override { return first_->Sync(); }
  std::optional<StoreSpace> Space() const override { return first_->Space(); }

 private:
  bool Both(const std::string& key) const { return both_ && falls_through_(key); }
  ObjectStore* Home(const std::string& key) { return Both(key) ? second_.get() : first_.get(); }
  // The object is in the second store; the first's copy is a convenience.
  static Status Copied(const std::string& key, const Status& st) {
    if (!st.ok()) spdlog::warn("{}: written to the primary's store, not to the mirror's own ({})", key, st.ToString());
    return Status::OK();
  }

  std::unique_ptr<ObjectStore> first_, second_;
  std::function<bool(const std::string&)> falls_through_;
  const bool both_;
};

}  // namespace

std::unique_ptr<ObjectStore> WithReadThrough(std::unique_ptr<ObjectStore> first, std::unique_ptr<ObjectStore> second,
                                             std::function<bool(const std::string& key)> falls_through,
                                             WriteBoth write_both) {
  return std::make_unique<ReadThroughStore>(std::move(first), std::move(second), std::move(falls_through),
                                            write_both);
}

}  // namespace tierfs
