// `--checkpoint FILE`: what a sync run has finished, so that a run killed at any moment
// (SIGKILL included) and started again with the same sides and options continues where
// it stopped and ends with the tree and the counts an uninterrupted run gives.
//
// The merge hands out keys in order. The watermark is the last key up to which every
// decision is carried out (skips at once, copies and deletions when their worker ends);
// the file holds the counts up to it. Beyond it, the workers' copies and deletions are
// journaled: "B" when one is handed out (before it changes anything), "E" with its outcome
// when it ends. A restarted run lists from just after the watermark; a key with an "E" is
// done (counted from the journal, not again); a key with only a "B" may have been carried
// out before the kill, so a copy found already in place then counts as copied (the
// killed run copied it) and a deletion whose key is gone counts as deleted.
//
// Directories whose times (and modes) are set at the end, directories removed at the end
// (--delete-dst) and hard-link groups (--hard-links) are kept in the file too, because the
// restarted run does not list the keys before the watermark again.
//
// Layout: text lines, each field percent-escaped ('%', tab and newline):
//   tierfs-sync-checkpoint 1 \t IDENTITY            (the sides and options; another run refuses it)
//   W \t KEY \t found copied skipped deleted failed bytes checked
//   M \t KEY \t mtime_ns mode uid gid                (a directory's attributes, set at the end)
//   R \t KEY                                         (a directory removed at the end)
//   H \t DEV:INO \t DST-INO \t KEY                   (first name of a hard-link group)
//   B \t op \t KEY                                   (op: c copy, d delete)
//   E \t op \t outcome bytes \t KEY                  (outcome: c copied, d deleted, f failed)
// Lines are appended with write(2) (the page cache survives a killed process); every
// 50,000 journal lines the file is rewritten (temporary file, rename) with what is past
// the watermark only. A power loss may lose the last lines: the run is then redone from an
// earlier watermark, which is safe (every step can be repeated) but may count a file
// copied before the loss as skipped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "sync/entry.h"

namespace tierfs::sync {

struct DirAttr {
  std::string key;
  int64_t mtime_ns = 0;
  uint32_t mode = 0, uid = 0, gid = 0;
  // Without --dirs, only directories that hold a file of the run get their attributes (and
  // exist at all): rsync -m's pruning. The checkpoint keeps only used ones.
  bool used = true;
};

class Checkpoint {
 public:
  // What an earlier run left.
  struct State {
    bool resumed = false;
    std::string watermark;  // "" nothing done yet
    Counts counts;          // up to the watermark
    std::map<std::string, char> done;   // past the watermark: key -> outcome ('c', 'd', 'f')
    std::map<std::string, uint64_t> done_bytes;
    std::set<std::string> pending_copy, pending_delete;  // "B" without "E"
    std::vector<DirAttr> dirs;
    std::vector<std::string> rmdirs;
    std::map<std::string, std::pair<uint64_t, std::string>> links;  // "DEV:INO" -> (dst inode, first key)
  };

  // Opens path (a missing file starts afresh); refuses a file written for another identity.
  static Result<std::unique_ptr<Checkpoint>> Open(const std::string& path, const std::string& identity);
  ~Checkpoint();

  const State& state() const { return state_; }

  void Begin(char op, const std::string& key);
  void End(char op, char outcome, uint64_t bytes, const std::string& key);
  void Dir(const DirAttr& d);
  void Rmdir(const std::string& key);
  void Link(const std::string& id, uint64_t dst_ino, const std::string& key);
  // Everything up to key is done and counts says so.
  void Advance(const std::string& key, const Counts& counts);
  // The first write error, if any (the run stops: a checkpoint that cannot be trusted is worse
  // than none).
  Status status();
  // The run ended: the file is removed.
  Status Finish();

 private:
  Checkpoint(std::string path, std::string identity) : path_(std::move(path)), identity_(std::move(identity)) {}
  Status Load();
  Status Rewrite();
  void Append(const std::string& line);

  std::string path_, identity_;
  State state_;
  std::mutex mu_;
  int fd_ = -1;
  Status error_;
  uint64_t lines_since_rewrite_ = 0;
  // Kept for rewrites: what is past the watermark.
  std::string watermark_;
  Counts counts_;
  std::map<std::string, std::string> open_;  // key -> its "B"/"E" lines past the watermark
  std::vector<DirAttr> dirs_;
  std::vector<std::string> rmdirs_;
  std::vector<std::pair<std::string, std::pair<uint64_t, std::string>>> links_;
};

}  // namespace tierfs::sync
