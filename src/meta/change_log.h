// The change log: every read-write transaction that changes the namespace appends, in the
// same transaction, one record of what it wrote. Consumers (incremental `tierfs sync` from a
// volume, `tierfs changelog`, mirror volumes) read it in commit order instead of walking the
// namespace.
//
// Layout (docs/key-schema.md):
//   "C" "changeSeq" -> u64: the last sequence number given out (absent: no record yet).
//   "H" seq(u64)    -> u64 commit time (ns), then per key written: u8 'P' (put) or 'D'
//                      (delete), str key, and for a put str value (common/encoding.h).
//   "H" last(u64)   -> a block: u8 0xff, u64 first seq, u64 last seq, u64 the last
//                      record's commit time, then a zstd frame of the records first..last,
//                      each u64 seq and str value (the record's value as above). A record's
//                      value never starts with 0xff: that byte of a time in ns is reached
//                      in 2262.
// Blocks: CompactChangeLog packs runs of old records (kCompactRecords at most, all seqs
// present) into one block keyed by the run's last seq. Records compress about tenfold
// together (a create's record: 251 bytes alone, 23 in a block of 1000), which keeps a log
// of hours smaller than the namespace it describes, and a lagging reader reads a thousand
// records a key. Readers see no difference: ReadChanges hands out the records of a block
// one by one, and a key they ask for that a block holds is found by the scan for the next
// key (the block's, keyed by its last seq). The newest records stay single keys, so a
// reader that keeps up reads them by key as before. A block is trimmed whole, once its last
// record is past the retention and read by every registered reader.
// Which writes are logged: the namespace and what a reader of it needs: inode keys ("A",
// except flock and record-lock keys), slice references ("K"), pack locations and members
// ("PL", "PM"), write-back marks ("W") and gateway users ("GU"). Sessions, heartbeats,
// counters, usage shards and cleanup queues are a client's own bookkeeping and are not.
// A transaction that writes nothing logged appends nothing, and neither does one run under
// an UnloggedScope: access-time updates (relatime) would otherwise make every first read
// of a file a change, and every consumer would re-examine what nobody changed.
//
// Order and gaps: the counter is read and written in the transaction itself, so the
// engine's isolation (SQLite's single writer, Redis's WATCH, PostgreSQL's SERIALIZABLE)
// gives sequence numbers in commit order with no gap: a reader that saw seq N has seen
// every change that committed before it. The price is that writers on a shared engine
// conflict on the counter; it is paid only on volumes whose log is on.
//
// On or off: FormatRecord::changelog_hours (`format --changelog-hours`, `config
// --changelog-hours`); 0 is off. Records older than that are trimmed by every client's
// background work (TrimChangeLog); a consumer that needs older ones finds a gap between
// the sequence it asks for and FirstChangeSeq and must start over with a full pass.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "meta/kv_engine.h"

namespace tierfs {

struct ChangeRecord {
  uint64_t seq = 0;
  int64_t time_ns = 0;
  // Key and new value (nullopt: deleted), in key order, each key once.
  std::vector<std::pair<std::string, std::optional<std::string>>> writes;
};

// Wraps an engine so that its read-write transactions append their change records.
std::unique_ptr<KvEngine> WithChangeLog(std::unique_ptr<KvEngine> inner);

// While one lives, the transactions this thread runs are not logged.
class UnloggedScope {
 public:
  UnloggedScope();
  ~UnloggedScope();
  UnloggedScope(const UnloggedScope&) = delete;
  UnloggedScope& operator=(const UnloggedScope&) = delete;
  static bool active();
};

// The sequence of the record the last read-write transaction run on this thread appended
// (0: none since ResetLastAppendedSeq): after a committed transaction, its commit's place
// in the log (a mirror's client that wrote through the primary waits for it,
// mirror/forward_writes.h).
uint64_t LastAppendedSeq();
void ResetLastAppendedSeq();
// The last sequence given out, read in t (0: none yet), and the key that holds it.
Result<uint64_t> ChangeSeqIn(KvTxn& t);
// The same in a read-only transaction of its own: one read, atomic on every engine.
Result<uint64_t> LastChangeSeq(KvEngine* engine);
std::string ChangeSeqKey();

// Whether a write to this key is logged (see above).
bool IsLoggedKey(std::string_view key);

std::string ChangeRecordKey(uint64_t seq);
std::string EncodeChangeRecord(const ChangeRecord& r);
// EIO naming the sequence when the record cannot be decoded.
Result<ChangeRecord> DecodeChangeRecord(uint64_t seq, std::string_view v);

// The last sequence given out (0: none yet) and the first still kept (LastChangeSeq() + 1
// when the log is empty).
struct ChangeLogBounds {
  uint64_t first = 1, last = 0;
};
Result<ChangeLogBounds> ChangeLogRange(KvEngine* engine);

// Calls fn for the records with seq >= from, in order, up to limit (0: no limit) or until
// fn returns false. Reads in transactions of at most 1000 records. A damaged record is an
// EIO naming its sequence, after fn has seen every record before it (fsck finds a gap
// there even when a later record is damaged).
// last, when given, is set to the counter's value the call read first: every record up to
// it existed then, unless trimmed.
Status ReadChanges(KvEngine* engine, uint64_t from, size_t limit, const std::function<bool(const ChangeRecord&)>& fn,
                   uint64_t* last = nullptr);

// Packs the records committed before cutoff_ns into blocks (see above), except a record
// that is not at least a commit time long (damaged: fsck names it) and runs of fewer than
// kMinCompactRecords (64). A block keyed by the newest record keeps the counter's value
// readable from the log, as the single record did. Returns how many records went into blocks; the
// caller runs it in the background (each client's, next to TrimChangeLog) and `tierfs
// changelog --compact`. resume, when given, is where the search starts and is left past
// the last run packed: a caller that keeps it does not read the blocks before it again
// (the search reads values, a block's too: a client's first pass over a long log reads
// it all once).
Result<uint64_t> CompactChangeLog(KvEngine* engine, int64_t cutoff_ns, uint64_t* resume = nullptr);

// In one read-write transaction that reads only these keys: deletes each that still holds
// the value given (put: only when all do, then puts it; a key of put's is overwritten, not
// deleted). Returns how many held it. Trimming and compaction find their keys in a
// read-only transaction first and use this (see TrimChangeLog).
Result<size_t> ReplaceUnchanged(KvEngine* engine, const std::vector<std::pair<std::string, std::string>>& expect,
                                const std::pair<std::string, std::string>* put);

// The records a stored value holds (a record, or a block: those from `from` on), for the
// key of sequence key_seq. EIO naming the sequence (or the block's range) when damaged.
Status DecodeChangeValue(uint64_t key_seq, std::string_view v, uint64_t from, std::vector<ChangeRecord>* out);
// The first sequence a stored value holds (key_seq for a record).
uint64_t FirstSeqOfValue(uint64_t key_seq, std::string_view v);
// The commit time of the last record a stored value holds (0: too short to say).
int64_t LastTimeOfValue(std::string_view v);

// Removes the records committed before cutoff_ns (in transactions of at most 1000), except
// those from keep_from on (the first record a registered consumer has not read,
// change_consumers.h); the newest record is always kept, so the counter's value stays
// readable from the log too.
Result<uint64_t> TrimChangeLog(KvEngine* engine, int64_t cutoff_ns, uint64_t keep_from = UINT64_MAX);

}  // namespace tierfs
