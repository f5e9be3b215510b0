// The metadata side of write-back (`mount --writeback`, chunk/writeback.h).
//
// A slice committed while its blocks are only staged on this client carries a staged mark
// in metadata (Meta::WriteSlice). WritebackMarks drops the marks of slices whose blocks
// have all reached the object store since, and publishes the bytes still staged in the
// session record (`tierfs status`), about once a second, from a thread of its own.
// StagedCheckFor answers, for any client, whether a block the store does not have belongs
// to a slice another client still uploads (CachedStore::SetStagedCheck).
//
// Ownership: Meta and CachedStore outlive it. Threads: the constructor starts the thread,
// the destructor sweeps one last time and joins it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "chunk/cached_store.h"

namespace tierfs {

class Meta;

StagedCheck StagedCheckFor(Meta* meta);

class WritebackMarks {
 public:
  WritebackMarks(Meta* meta, CachedStore* store);
  ~WritebackMarks();
  WritebackMarks(const WritebackMarks&) = delete;
  WritebackMarks& operator=(const WritebackMarks&) = delete;

  // Drops the marks of uploaded slices and publishes the staged bytes now.
  void Sweep();

 private:
  void Loop();

  Meta* const meta_;
  CachedStore* const store_;
  uint64_t published_ = 0;  // staged bytes in the session record (Sweep's thread only)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierfs
