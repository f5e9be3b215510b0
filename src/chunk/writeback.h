// Writeback: `mount --writeback`. A written block is made durable in the local staging area
// (chunk/staging.h) and counts as uploaded at once, so the writer's slice is committed to
// metadata without waiting for the object store; the upload runs in the background, in
// staging order, on `threads` threads, and is retried with backoff until it succeeds or
// the block's slice is deleted. That loop is the only retry: put and pack are called with
// a budget of one attempt (common/io_budget.h), which the store's client honours.
//
// What survives what (README, "Consistency and durability"):
// - a staged block survives a crash or kill of the client and a power loss: the next
//   process that opens the staging area (the next mount, or `tierfs upload-staged`) uploads
//   it first;
// - a store outage only delays uploads; the client keeps staging and reading its blocks;
// - a staging area that cannot be written (a full or failing disk) is not used for that
//   block: Stage fails and the caller uploads it directly, as without write-back.
//
// Blocks not yet uploaded are readable through Read (from memory while they fit in
// memory_bytes, else from the staging file, verified). Slices are tracked so the caller
// can tell when a slice's last staged block reached the store (HasSlice, and the marks
// below), which is when its "staged" record in metadata may go.
//
// Small-file packing: blocks of at most Options::pack_below bytes whose slice was marked
// packable (a whole small slice, committed with kRecordMayBePacked) are not uploaded one by
// one: the uploader takes every such block that is ready, up to pack_bytes, and hands them
// to PackFn as one pack object; they count as uploaded once PackFn stored the pack and
// recorded where each member is. Small blocks wait at least kPackWindow after staging, so
// that the files written close together (and their commits) are there to share a pack.
//
// Threads: any thread may call any method. put, pack and uploaded run on upload threads
// without the lock held.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "chunk/staging.h"
#include "common/status.h"

namespace tierfs {

struct WritebackStats {
  uint64_t staged_blocks = 0, staged_bytes = 0;  // waiting for, or in, their upload
  uint64_t uploaded_blocks = 0, uploaded_bytes = 0;
  uint64_t retries = 0;       // failed upload attempts (each is tried again)
  uint64_t packs = 0, packed_blocks = 0;  // pack objects uploaded, and the blocks in them
  uint64_t stage_errors = 0;  // blocks the staging area could not take (uploaded directly)
  uint64_t lost = 0;          // staged blocks that could not be read back to upload
};

class Writeback {
 public:
  using PutFn = std::function<Status(const std::string& key, std::string_view data)>;
  using DeleteFn = std::function<void(const std::string& key)>;
  // After a block reached the store, with its bytes when they are in memory (else null).
  using UploadedFn = std::function<void(const std::string& key, const std::shared_ptr<const std::string>& data)>;
  struct PackMember {
    std::string key;  // the staged block (its slice's only block)
    uint64_t slice = 0;
    uint32_t off = 0;  // in the pack
    uint32_t len = 0;
  };
  // Stores `data` as one new pack object and records where each member is; OK only when
  // both happened (an error is retried, with a new pack).
  using PackFn = std::function<Status(const std::vector<PackMember>& members, std::string_view data)>;
  struct Options {
    int threads = 4;
    uint64_t memory_bytes = 64ull << 20;  // staged blocks kept in memory for their upload
    std::chrono::milliseconds backoff_base{100}, backoff_cap{30000};
    // A staged block waits this long before its upload starts (`--upload-delay`), so that a
    // burst of writes (a checkpoint) runs without uploads competing for the machine, and a
    // file deleted meanwhile (scratch data) is never uploaded. Drain uploads at once.
    std::chrono::milliseconds delay{0};
    // Packing (with pack): blocks of at most pack_below bytes of packable slices; packs of
    // up to pack_bytes. 0: no packing.
    uint32_t pack_below = 0;
    uint32_t pack_bytes = 16u << 20;
  };
  static constexpr std::chrono::milliseconds kPackWindow{300};

  // Takes over the staging area and queues what it already holds (recovered), first.
  Writeback(std::unique_ptr<Staging> staging, const std::vector<Staging::Entry>& recovered, PutFn put,
            DeleteFn del, UploadedFn uploaded, Options opts, PackFn pack = nullptr);
  // Stops uploading (a running upload finishes or gives up); staged blocks stay on disk.
  ~Writeback();
  Writeback(const Writeback&) = delete;
  Writeback& operator=(const Writeback&) = delete;

  const std::string& dir() const { return staging_->dir(); }

  // Stages the block durably and queues its upload. An error means it was not staged (the
  // caller uploads it itself); it is counted in stage_errors.
  Status Stage(const std::string& key, std::shared_ptr<const std::string> data);
  // A staged block, or null when the key is not staged (or cannot be read back).
  std::shared_ptr<const std::string> Read(const std::string& key);
  // Whether any block of slice id is still staged.
  bool HasSlice(uint64_t id);
  // The block's slice was deleted: its upload is skipped, or, when it is running, the
  // object is deleted once it lands.
  void Discard(const std::string& key);

  // Slices committed with a "staged" mark in metadata (Mark), and the marked ones whose
  // blocks have all reached the store since (TakeUploadedMarks: each returned once).
  // packable: the slice's record says it may be packed (kRecordMayBePacked).
  void Mark(uint64_t id, bool packable = false);
  std::vector<uint64_t> TakeUploadedMarks();

  // Waits until nothing is staged or max passed, uploading without delay from now on;
  // calls progress about every 10 s while waiting. Returns what is still staged.
  WritebackStats Drain(std::chrono::milliseconds max, const std::function<void(const WritebackStats&)>& progress);
  WritebackStats stats() const;

 private:
  struct Item {
    uint64_t seq = 0;
    uint32_t len = 0;
    std::shared_ptr<const std::string> data;  // null once dropped for memory
    bool uploading = false;
    bool discarded = false;
    int64_t ready_ns = 0;  // monotonic time its upload may start
  };
  // With mu_ held: whether the item goes into a pack.
  bool Packable(const std::string& key, const Item& item) const;
  void UploadLoop();
  // Uploads one block until it lands, the writeback stops, or it is discarded.
  void UploadOne(const std::string& key);
  // Uploads the blocks as one pack until it lands or the writeback stops.
  void UploadPack(const std::vector<std::string>& keys);
  // The staged block's bytes (from memory or its staging file) and entry; null when its
  // file cannot be read back: the block is then counted lost and forgotten.
  std::shared_ptr<const std::string> LoadForUpload(const std::string& key, Staging::Entry* e);
  void Forget(const std::string& key);  // with mu_ held: drops the item and its accounting

  std::unique_ptr<Staging> staging_;
  const PutFn put_;
  const DeleteFn del_;
  const UploadedFn uploaded_;
  const Options opts_;
  const PackFn pack_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // queue_ has work, or stopping_
  std::condition_variable idle_cv_;  // items_ shrank
  std::deque<std::string> queue_;    // keys in staging order, not yet taken by an uploader
  std::unordered_map<std::string, Item> items_;
  std::unordered_map<uint64_t, int> slice_blocks_;  // slice id -> staged blocks
  std::set<uint64_t> marks_;
  std::set<uint64_t> packable_;  // marked slices whose records allow packing
  uint64_t next_seq_;
  uint64_t memory_ = 0;
  bool stopping_ = false;
  bool hurry_ = false;  // Drain runs: no upload delay
  WritebackStats st_;

  std::vector<std::thread> threads_;
};

}  // namespace tierfs
