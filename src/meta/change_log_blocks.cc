// The change log's blocks: runs of old records packed into one zstd-compressed value
// (layout and why: change_log.h). Packing here, unpacking for the readers in
// change_log.cc.
#include <ostream>

#include "common/encoding.h"
#include "common/zstd_stream.h"
#include "meta/change_log.h"
#include "meta/key_schema.h"

namespace tierfs {
namespace {

constexpr uint8_t kBlockMark = 0xff;
constexpr size_t kBlockHeader = 1 + 8 + 8 + 8;
// At most this many records in a block, and at most about this many bytes of them: a
// reader holds a whole block in memory.
constexpr size_t kCompactRecords = 1000;
constexpr size_t kCompactBytes = 4 << 20;
// Shorter runs stay single records (a trickle of commits is not worth a block).
constexpr size_t kMinCompactRecords = 64;
constexpr std::string_view kLogPrefix = "H";

bool IsBlock(std::string_view v) { return v.size() >= kBlockHeader && static_cast<uint8_t>(v[0]) == kBlockMark; }

struct BlockHeader {
  uint64_t first = 0, last = 0;
  int64_t last_time = 0;
};

BlockHeader HeaderOf(std::string_view v) {
  ByteReader in(v.substr(1));
  BlockHeader h;
  h.first = in.U64();
  h.last = in.U64();
  h.last_time = static_cast<int64_t>(in.U64());
  return h;
}

Status Damaged(uint64_t first, uint64_t last, const std::string& why) {
  return Status::Err(EIO, "change records " + std::to_string(first) + " to " + std::to_string(last) +
                              " (a block) are damaged (" + why + ")");
}

}  // namespace

uint64_t FirstSeqOfValue(uint64_t key_seq, std::string_view v) {
  if (!IsBlock(v)) return key_seq;
  const BlockHeader h = HeaderOf(v);
  return h.last == key_seq && h.first <= h.last ? h.first : key_seq;
}

int64_t LastTimeOfValue(std::string_view v) {
  if (IsBlock(v)) return HeaderOf(v).last_time;
  if (v.size() < 8) return 0;
  ByteReader in(v);
  return static_cast<int64_t>(in.U64());
}

Status DecodeChangeValue(uint64_t key_seq, std::string_view v, uint64_t from, std::vector<ChangeRecord>* out) {
  if (!IsBlock(v)) {
    if (key_seq < from) return Status::OK();
    ASSIGN_OR_RETURN(ChangeRecord r, DecodeChangeRecord(key_seq, v));
    out->push_back(std::move(r));
    return Status::OK();
  }
  const BlockHeader h = HeaderOf(v);
  if (h.last != key_seq || h.first > h.last) return Damaged(h.first, key_seq, "its range does not match its key");
  if (h.last < from) return Status::OK();
  auto payload = ZstdDecompress(v.substr(kBlockHeader));
  if (!payload.ok()) return Damaged(h.first, h.last, payload.status().message());
  ByteReader in(*payload);
  uint64_t want = h.first;
  while (in.ok() && !in.empty()) {
    const uint64_t seq = in.U64();
    std::string_view value = in.Str();
    if (!in.ok()) break;
    if (seq != want) return Damaged(h.first, h.last, "record " + std::to_string(seq) + " out of place");
    ++want;
    if (seq < from) continue;
    ASSIGN_OR_RETURN(ChangeRecord r, DecodeChangeRecord(seq, value));
    out->push_back(std::move(r));
  }
  if (!in.ok() || want != h.last + 1) return Damaged(h.first, h.last, "cut off");
  return Status::OK();
}

Result<uint64_t> CompactChangeLog(KvEngine* engine, int64_t cutoff_ns, uint64_t* resume_io) {
  uint64_t packed = 0;
  uint64_t own = 0;
  uint64_t& resume = resume_io ? *resume_io : own;  // the scan goes on from here (the blocks before it are done)
  for (int rounds = 0; rounds < 100000; ++rounds) {
    // The first run of single old records, all seqs present, found in a read-only
    // transaction (a scan in the read-write one would conflict on Redis with every append).
    std::vector<std::pair<std::string, std::string>> run;  // key, value
    RETURN_IF_ERROR(engine->Txn(
        [&](KvTxn& t) -> Status {
          run.clear();
          size_t bytes = 0;
          uint64_t last = 0;
          return t.Scan(ChangeRecordKey(resume), PrefixEnd(kLogPrefix), 0, [&](std::string_view k, std::string_view v) {
            if (k.size() != 9) return false;
            const uint64_t seq = keys::DecodeU64(k.substr(1));
            const bool single = !IsBlock(v) && v.size() >= 8;
            const bool old = single && LastTimeOfValue(v) < cutoff_ns;
            if (old && !run.empty() &&
                (last + 1 != seq || run.size() >= kCompactRecords || bytes + v.size() > kCompactBytes)) {
              if (run.size() >= kMinCompactRecords) return false;  // pack what we have
              run.clear();
              bytes = 0;
            }
            if (old) {
              run.emplace_back(k, v);
              bytes += v.size() + 12;
              last = seq;
              return true;
            }
            if (run.size() >= kMinCompactRecords) return false;
            run.clear();
            bytes = 0;
            // A block or a damaged record is passed; a new record ends the search.
            return !single;
          });
        },
        true));
    if (run.size() < kMinCompactRecords) return packed;
    std::string payload;
    for (const auto& [k, v] : run) {
      payload.append(k, 1, 8);  // the seq, as PutU64 writes it
      PutStr(&payload, v);
    }
    ZstdWriter z;
    {
      std::ostream os(&z);
      os.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    }
    RETURN_IF_ERROR(z.Finish());
    const uint64_t first = keys::DecodeU64(std::string_view(run.front().first).substr(1));
    const uint64_t last = keys::DecodeU64(std::string_view(run.back().first).substr(1));
    std::pair<std::string, std::string> block{run.back().first, std::string(1, static_cast<char>(kBlockMark))};
    PutU64(&block.second, first);
    PutU64(&block.second, last);
    PutU64(&block.second, static_cast<uint64_t>(LastTimeOfValue(run.back().second)));
    block.second += z.out();
    ASSIGN_OR_RETURN(size_t same, ReplaceUnchanged(engine, run, &block));
    if (same == run.size()) packed += run.size();  // else another client packed or trimmed them first
    resume = last + 1;
  }
  return packed;
}

}  // namespace tierfs
