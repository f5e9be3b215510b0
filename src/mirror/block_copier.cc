#include "mirror/block_copier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "chunk/block_key.h"
#include "common/encoding.h"
#include "meta/attr.h"
#include "meta/key_schema.h"
#include "meta/types.h"

namespace tierfs::mirror {

BlockCopier::BlockCopier(ObjectStore* from, ObjectStore* to, KvEngine* primary_engine, std::string volume,
                         uint32_t block_size, int threads)
    : from_(from),
      to_(to),
      primary_(primary_engine),
      volume_(std::move(volume)),
      block_size_(block_size),
      threads_(std::max(1, threads)) {}

void BlockCopier::Objects(std::string_view key, const std::string* value, std::vector<ObjectRef>* out) const {
  uint32_t index;
  uint64_t seq;
  if (value && key.size() == 22 && key[0] == 'A' && key[9] == 'C' && keys::ParseChunkRecordKey(key, &index, &seq)) {
    SliceRecord r;
    if (!DecodeSliceRecord(*value, &r) || r.id == 0) return;
    const bool may_be_packed = r.flags & kRecordMayBePacked;
    const uint32_t n = BlockCount(r.size, block_size_);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t len = BlockLength(r.size, block_size_, i);
      out->push_back(ObjectRef{BlockKey(volume_, r.id, i, len), len, r.id, may_be_packed, false});
    }
    return;
  }
  if (value && key.starts_with("PL") && key.size() == 10) {
    ByteReader br(*value);
    const uint64_t pack = br.U64();
    const uint32_t pack_len = br.U32();
    if (!br.ok()) return;
    out->push_back(ObjectRef{PackKey(volume_, pack, pack_len), pack_len, 0, false, false});
    return;
  }
  if (!value && key.size() == 9 && key[0] == 'W') {
    const uint64_t id = keys::DecodeU64(key.substr(1));
    // Every block key of the slice starts with this ("..._" + index): BlockKey without the index and length.
    std::string prefix = BlockKey(volume_, id, 0, 1);
    prefix.resize(prefix.size() - 3);
    out->push_back(ObjectRef{prefix, 0, id, true, true});
  }
}

Result<bool> BlockCopier::StagedOrPacked(uint64_t slice) {
  bool found = false;
  RETURN_IF_ERROR(primary_->Txn(
      [&](KvTxn& t) -> Status {
        ASSIGN_OR_RETURN(auto w, t.Get(keys::Staged(slice)));
        if (w) {
          found = true;
          return Status::OK();
        }
        ASSIGN_OR_RETURN(auto pl, t.Get(keys::PackLocation(slice)));
        found = pl.has_value();
        return Status::OK();
      },
      true));
  return found;
}

Status BlockCopier::CopyOne(const ObjectRef& r, CopyResult* res, std::atomic<int64_t>* left) {
  auto add = [&](uint64_t CopyResult::*field, uint64_t n) {
    std::lock_guard<std::mutex> l(res_mu_);
    res->*field += n;
  };
  if (r.listing) {
    // The blocks of a slice whose write-back mark went: list them, copy each.
    std::string after;
    for (;;) {
      ASSIGN_OR_RETURN(auto page, from_->List(r.key, after, 1000));
      if (page.empty()) return Status::OK();
      for (const ObjectInfo& o : page) {
        RETURN_IF_ERROR(CopyOne(ObjectRef{o.key, o.size, r.slice, true, false}, res, nullptr));
        after = o.key;
      }
    }
  }
  auto there = to_->Head(r.key);
  if (there.ok() && there->size == r.size) {
    add(&CopyResult::present, 1);
    if (left) left->fetch_sub(static_cast<int64_t>(r.size));
    return Status::OK();
  }
  if (!there.ok() && there.status().code() != ENOENT) return there.status().With("the mirror's store");
  auto data = from_->Get(r.key);  // whole object: every checksum segment verified
  if (!data.ok()) {
    if (data.status().code() != ENOENT) return data.status().With("reading " + r.key + " from the primary's store");
    if (left) left->fetch_sub(static_cast<int64_t>(r.size));
    if (r.slice != 0 && r.may_be_elsewhere) {
      ASSIGN_OR_RETURN(bool elsewhere, StagedOrPacked(r.slice));
      if (elsewhere) {
        add(&CopyResult::deferred, 1);
        return Status::OK();
      }
    }
    spdlog::warn("mirror: {} is not in the primary's store any more (deleted before this mirror applied its "
                 "release); the records that reference it are applied without it",
                 r.key);
    add(&CopyResult::missing, 1);
    return Status::OK();
  }
  if (data->size() != r.size) {
    return Status::Err(EIO, "object " + r.key + " in the primary's store holds " + std::to_string(data->size()) +
                                " bytes, not the " + std::to_string(r.size) + " its key says");
  }
  RETURN_IF_ERROR(to_->Put(r.key, *data).With("writing " + r.key + " to the mirror's store"));
  add(&CopyResult::objects, 1);
  add(&CopyResult::bytes, data->size());
  if (left) left->fetch_sub(static_cast<int64_t>(r.size));
  return Status::OK();
}

Result<CopyResult> BlockCopier::Copy(std::vector<ObjectRef> refs, std::atomic<int64_t>* left) {
  CopyResult res;
  if (refs.empty()) return res;
  std::sort(refs.begin(), refs.end(), [](const ObjectRef& a, const ObjectRef& b) { return a.key < b.key; });
  refs.erase(std::unique(refs.begin(), refs.end(), [](const ObjectRef& a, const ObjectRef& b) { return a.key == b.key; }),
             refs.end());
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i; !failed && (i = next.fetch_add(1)) < refs.size();) {
      Status st = CopyOne(refs[i], &res, left);
      if (!st.ok()) {
        std::lock_guard<std::mutex> l(mu);
        if (first.ok()) first = st;
        failed = true;
      }
    }
  };
  const int n = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads_), refs.size()));
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (!first.ok()) return first;
  return res;
}

}  // namespace tierfs::mirror
