// Incremental rounds from a TierFS volume: `tierfs sync --changes FILE`.
//
// FILE remembers, for one source volume, source, destination and set of options, the
// change-log sequence (meta/change_log.h) the last complete round reached. The next round
// reads the records after it (ChangeFeed::Changed): the entries made, removed, renamed or
// changed since. The merge then looks, on both sides, only at
//   - those entries, each looked up by name in its directory, and the directories on the
//     way to them (a directory of a million entries with one changed is not listed);
//   - in full, every directory that is a directory on one side only: nothing below it can be
//     trusted. Only an entry the records made, removed, renamed or replaced can be one, or a
//     directory below one: a directory whose entry did not change is on both sides or on
//     neither, as the last round left them, and is not looked up.
// Everything else did not change on the source. The destination is trusted to be as the
// last round left it; a round without --changes compares everything and catches changes
// made to the destination behind sync's back. Nothing changed: nothing is listed.
//
// The round is a full one, and says why, when FILE is missing or names another source,
// destination or options; when the log was trimmed past FILE's sequence, or the volume keeps
// none; when a change cannot be placed in a directory. FILE is written only after a round
// with no failure, with the newest sequence read before the round began, so that what
// changed during a round is seen by the next.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "sync/side.h"

namespace tierfs::sync {

struct ChangesPlan {
  bool incremental = false;
  std::string why_full;         // why not, for the log line
  SourceChanges changes;        // directories and entries the records name
  uint64_t head = 0;            // the sequence to save once the round succeeded
  uint64_t records = 0;         // change records read
};

// identity: what the round's result depends on besides the source (destination, options).
Result<ChangesPlan> PlanRound(const std::string& file, Side* src, const std::string& identity);
Status SaveRound(const std::string& file, Side* src, const std::string& identity, uint64_t head);

// What an incremental round lists. Thread-safe.
class ChangeScope {
 public:
  ChangeScope(SourceChanges changes, Side* src, Side* dst);
  // Whether directory dir ("" the top) is walked. listed_on: a side known to hold dir as a
  // directory (the one whose listing met it), which is then not asked.
  Result<bool> Opens(const std::string& dir, Side* listed_on = nullptr);
  // Which entries of a walked directory are listed (side.h's Children): all of a
  // directory on one side only, else the changed ones and those on the way to them.
  Result<NameList> Children(const std::string& dir);
  // Whether key is one an incremental round compares (for sides listed flat).
  Result<bool> Covers(const std::string& key);

 private:
  // Whether dir ("" never) is a directory on one side only, or below one.
  Result<bool> OneSided(const std::string& dir, Side* listed_on);

  SourceChanges c_;
  Side* src_;
  Side* dst_;
  std::map<std::string, std::shared_ptr<std::vector<std::string>>> children_;  // dir -> names, sorted
  std::mutex mu_;
  std::map<std::string, bool> one_sided_;  // guarded by mu_
};

}  // namespace tierfs::sync
