#include "client/bucket_claim.h"

#include <spdlog/spdlog.h>

#include <iostream>

#include "cmd/util.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/bucket_owner.h"

namespace tierfs::client {

Result<std::unique_ptr<OwnerGuard>> OwnBucketFor(KvEngine* engine, ObjectStore* store, const FormatRecord& fmt,
                                                 const std::string& meta_url, const std::string& action) {
  BucketOwner other;
  ASSIGN_OR_RETURN(Ownership own, CheckBucketOwner(engine, store, fmt, /*claim=*/true, &other));
  if (own == Ownership::kOther) return NotOwner(other, fmt, meta_url, action);
  if (own == Ownership::kClaimed) {
    spdlog::info("the objects of volume {} had no owning metadata engine recorded; {} owns them now ({}/owner)",
                 fmt.name, engine->Describe(), fmt.name);
  }
  ASSIGN_OR_RETURN(std::string id, EngineId(engine, false));
  return std::make_unique<OwnerGuard>(engine, store, fmt, id);
}

Status TakeBucketAndSay(KvEngine* engine, const FormatRecord& fmt) {
  ASSIGN_OR_RETURN(auto store, OpenStore(fmt));
  ASSIGN_OR_RETURN(auto before, TakeBucket(engine, store.get(), fmt));
  ASSIGN_OR_RETURN(std::string id, EngineId(engine, false));
  if (before && before->engine_id == id) {
    std::cout << engine->Describe() << " already owns the objects of volume " << fmt.name << std::endl;
  } else {
    std::cout << engine->Describe() << " now owns the objects of volume " << fmt.name << " in " << fmt.storage << " "
              << fmt.bucket
              << (before ? " (taken over from " + (before->engine.empty() ? before->engine_id : before->engine) +
                               "; its clients delete no more objects, and it must no longer be used)"
                         : "")
              << std::endl;
  }
  return Status::OK();
}

}  // namespace tierfs::client
