// Staging: the write-back area of one volume on local disk (`mount --writeback`), where a
// written block is made durable before its upload, and from where it is uploaded later.
//
// Layout, under DIR (CACHE-DIR/VOLUME-UUID/staging):
//   SSSSSSSSSSSSSSSS   one staged block per file, in the disk cache's block format
//                      (chunk/cache_file.h: the block's key and checksums, then its bytes),
//                      mode 0600, named by its staging sequence number in hex
//   tmp.SSSS...        a block being staged; renamed to its final name once fsynced
//   lock               flock'ed by the process that uploads from this directory
//
// Put writes the block to a temporary file, fsyncs it, renames it and fsyncs the
// directory: once Put returns, the block survives a crash of the client and a power loss.
// Open lists what earlier processes staged and did not upload, in staging order, so that
// they are uploaded first; temporary files (a crash mid-Put: never acknowledged) are
// removed, and a file whose header is damaged is moved aside to damaged.SSSS... and
// reported, never uploaded.
//
// Threads: any thread may call any method; each call works on its own files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tierfs {

class Staging {
 public:
  struct Entry {
    uint64_t seq = 0;
    std::string key;
    uint32_t len = 0;
  };

  // Opens DIR (created when missing) and takes its lock (EBUSY naming the holder when
  // another process has it). *staged receives the blocks found there, in staging order;
  // *damaged the names of files moved aside.
  static Result<std::unique_ptr<Staging>> Open(const std::string& dir, std::vector<Entry>* staged,
                                               std::vector<std::string>* damaged);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  const std::string& dir() const { return dir_; }

  // Stages the block durably under sequence number seq (strictly larger than any staged
  // before, see NextSeq). Errors (ENOSPC, EIO, ...) leave nothing behind.
  Status Put(uint64_t seq, const std::string& key, std::string_view data);
  // The staged block, its checksums verified and its key checked; an error names what is
  // wrong (the block is then lost to this client: the caller reports it).
  Result<std::string> Read(const Entry& e) const;
  // Removes a staged block (uploaded, or its slice deleted).
  void Remove(uint64_t seq);
  // One more than the largest sequence number found at Open.
  uint64_t first_free_seq() const { return first_free_seq_; }

 private:
  Staging(std::string dir, int lock_fd, uint64_t first_free_seq)
      : dir_(std::move(dir)), lock_fd_(lock_fd), first_free_seq_(first_free_seq) {}
  std::string PathOf(uint64_t seq) const;

  const std::string dir_;
  const int lock_fd_;
  const uint64_t first_free_seq_;
};

}  // namespace tierfs
