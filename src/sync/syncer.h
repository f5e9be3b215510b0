// The merge at the heart of `tierfs sync`: both sides are listed as sorted streams of keys
// (side.h) and walked together once; each key is decided as it passes (copy, skip, delete)
// and carried out by a pool of workers, so memory does not grow with the number of keys.
//
// Memory: the two listings (see each side), the work queue (4 tasks per worker), a copy
// buffer per worker (4 MiB; part_threads x 16 MiB for a large object to a store), the
// window of decisions between the checkpoint's watermark and the merge (at most 100,000),
// and, kept to the end of the run, one record per directory whose times are set last and
// one per hard-link group (--hard-links): about 100 bytes each.
//
// Decisions, for a key found on both sides: --force copies; --ignore-existing skips;
// --update skips when the destination is newer; --checksum compares contents (MD5s a side
// keeps, else read); otherwise the key is unchanged when sizes are equal and modification
// times are equal at the coarser precision of the two sides (for an object store
// destination, whose times are upload times: when it is not older than the source).
// A key only on the source is copied unless --existing; only on the destination, removed
// with --delete-dst. Directories exist on object stores only as markers (--dirs).
//
// Counts (entry.h) add up: every key found is copied, skipped or failed once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "sync/entry.h"
#include "sync/filter.h"
#include "sync/side.h"

namespace tierfs::sync {

class ChangeScope;

struct SyncOptions {
  bool update = false, ignore_existing = false, existing = false, force = false, checksum = false;
  bool dirs = false, perms = false, links = false, hard_links = false, xattrs = false;
  bool delete_dst = false, delete_src = false, dry_run = false, check_new = false, check_all = false;
  Filter filter;
  bool have_files_from = false;
  std::set<std::string> files_from;  // paths without a leading or trailing '/'
  int64_t min_size = -1, max_size = -1;
  double min_age = -1, max_age = -1;  // seconds
  std::string start, end;             // key range, both included; "" unbounded
  int threads = 10;
  double bwlimit = 0;                 // bytes per second; 0 unlimited
  std::string checkpoint;             // file; "" none
  // An incremental round (changes.h): only the directories it opens are listed; null: all.
  ChangeScope* scope = nullptr;
  // What the run has to say about one key (dry-run decisions, failures); may be null.
  std::function<void(const std::string& what, const std::string& key, const std::string& detail)> report;
};

// Live numbers, for the progress bar and the metrics.
struct Progress {
  std::atomic<uint64_t> listed{0}, found{0}, copied{0}, skipped{0}, deleted{0}, failed{0}, bytes{0};
  std::atomic<uint64_t> pending_bytes{0};  // bytes of copies decided and not yet done
};

// Runs one sync from src to dst. An error (a side cannot be listed, the checkpoint cannot
// be written) stops the run and is returned; failures of single keys are counted.
Result<Counts> RunSync(Side* src, Side* dst, const SyncOptions& options, Progress* progress);

// The options that change a run's decisions, for the checkpoint's identity.
std::string OptionsIdentity(const SyncOptions& o);

}  // namespace tierfs::sync
