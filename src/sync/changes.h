// Incremental rounds from a TierFS volume: `tierfs sync --changes FILE`.
//
// FILE remembers, for one source volume, source, destination and set of options, the
// change-log sequence (meta/change_log.h) the last complete round reached. The next round
// reads the records after it (ChangeFeed::ChangedDirs) and the merge lists only:
//   - the directories those records name and their ancestors, one level each;
//   - in full, every directory that is a directory on one side only (made, moved in or
//     removed since, or replaced by a file): nothing below it can be trusted.
// Everything else did not change on the source. The destination is trusted to be as the
// last round left it; a round without --changes compares everything and catches changes
// made to the destination behind sync's back.
//
// A directory is listed on both sides or on neither (ChangeScope::Opens is symmetric):
// listed on one only, the other's entries would look deleted to --delete-dst.
//
// The round is a full one, and says why, when FILE is missing or names another source,
// destination or options; when the log was trimmed past FILE's sequence, or the volume keeps
// none; when a change cannot be placed in a directory. FILE is written only after a round
// with no failure, with the newest sequence read before the round began, so that what
// changed during a round is seen by the next.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "common/status.h"
#include "sync/side.h"

namespace tierfs::sync {

struct ChangesPlan {
  bool incremental = false;
  std::string why_full;         // why not, for the log line
  std::set<std::string> dirty;  // directory keys ("" the top) whose entries changed
  uint64_t head = 0;            // the sequence to save once the round succeeded
  uint64_t records = 0;         // change records read
};

// identity: what the round's result depends on besides the source (destination, options).
Result<ChangesPlan> PlanRound(const std::string& file, Side* src, const std::string& identity);
Status SaveRound(const std::string& file, Side* src, const std::string& identity, uint64_t head);

// Which directories an incremental round lists. Thread-safe.
class ChangeScope {
 public:
  ChangeScope(std::set<std::string> dirty, Side* src, Side* dst)
      : dirty_(std::move(dirty)), src_(src), dst_(dst) {}
  // Whether the entries of directory dir ("" the top) are listed. listed_on: a side known to
  // hold dir as a directory (the one whose listing met it), which is then not asked.
  Result<bool> Opens(const std::string& dir, Side* listed_on = nullptr);
  // Whether key's directory and all above it are listed.
  Result<bool> Covers(const std::string& key);

 private:
  std::set<std::string> dirty_;
  Side* src_;
  Side* dst_;
  std::mutex mu_;
  std::map<std::string, bool> opens_;  // guarded by mu_
};

}  // namespace tierfs::sync
