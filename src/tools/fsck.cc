#include "tools/fsck.h"

#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <set>
#include <unordered_set>

#include "chunk/block_key.h"
#include "common/thread_pool.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/meta.h"
#include "meta/slice_map.h"
#include "object/object_store.h"

namespace tierfs {

size_t FsckReport::Remaining() const {
  size_t n = 0;
  for (const auto& p : problems) n += p.repaired ? 0 : 1;
  return n;
}

namespace {

std::string Join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }

// Checks block objects on a pool of threads (one HEAD or GET each), because a remote store
// answers one request at a time per connection. Results are kept here until Finish.
class ObjectChecker {
 public:
  ObjectChecker(Meta* meta, ObjectStore* store, const FsckOptions& opts)
      : meta_(meta), store_(store), deep_(opts.deep),
        pool_(std::make_unique<ThreadPool>("fsck", std::max(1, opts.threads), 4 * std::max(1, opts.threads))) {}

  void Check(std::string key, uint32_t len, std::string path) {
    pool_->Submit([this, key = std::move(key), len, path = std::move(path)] {
      FsckProblem prob;
      uint64_t verified = 0;
      if (deep_) {
        auto data = store_->Get(key);
        if (!data.ok()) {
          prob = {data.status().code() == ENOENT ? "missing-object" : "corrupt-object", path,
                  key + ": " + data.status().message()};
        } else if (data->size() != len) {
          prob = {"bad-object-size", path,
                  key + " holds " + std::to_string(data->size()) + " bytes, expected " + std::to_string(len)};
        } else {
          verified = data->size();
        }
      } else {
        auto head = store_->Head(key);
        if (!head.ok()) {
          prob = {"missing-object", path, key + ": " + head.status().message()};
        } else if (head->size != len) {
          prob = {"bad-object-size", path,
                  key + " holds " + std::to_string(head->size) + " bytes, expected " + std::to_string(len)};
        }
      }
      if (prob.kind == "missing-object") Staged(key, &prob);
      std::lock_guard<std::mutex> l(mu_);
      checked_++;
      verified_ += verified;
      if (!prob.kind.empty()) problems_.push_back(std::move(prob));
    });
  }

  uint64_t Checked() {
    std::lock_guard<std::mutex> l(mu_);
    return checked_;
  }
  // Waits for every queued check and adds the results to r.
  void Finish(FsckReport* r) {
    pool_.reset();
    r->objects_checked += checked_;
    r->bytes_verified += verified_;
    for (auto& p : problems_) r->problems.push_back(std::move(p));
    problems_.clear();
  }

 private:
  // A missing block of a slice staged for write-back (`mount --writeback`) is not lost: it
  // waits on its writer's disk. Says so, and where.
  void Staged(const std::string& key, FsckProblem* prob) {
    std::string volume;
    uint64_t id = 0;
    uint32_t index = 0, len = 0;
    if (!ParseBlockKey(key, &volume, &id, &index, &len)) return;
    auto mark = meta_->StagedBy(id);
    if (!mark.ok() || !*mark) return;
    prob->kind = "staged-object";
    const auto& m = **mark;
    std::string where = m.dir.empty() ? "its cache directory" : m.dir;
    prob->detail = key + " is staged for write-back on host " + (m.host.empty() ? "?" : m.host) +
                   (m.dir.empty() ? "" : " in " + m.dir) + " (session " + std::to_string(m.sid) + ", " +
                   (m.alive ? "uploading" : "not running") + ") and not yet in the object store" +
                   (m.alive ? "" : ": mount again on that host with the same cache directory (it uploads first), or "
                                   "run `tierfs upload-staged META-URL " + where + "` there");
  }

  Meta* meta_;
  ObjectStore* store_;
  const bool deep_;
  std::mutex mu_;
  uint64_t checked_ = 0, verified_ = 0;     // guarded by mu_
  std::vector<FsckProblem> problems_;       // guarded by mu_
  std::unique_ptr<ThreadPool> pool_;
};

// Queues a check of every block object the file's slice windows need.
void CheckFileData(Meta* meta, ObjectChecker* checker, Ino ino, const std::string& path,
                   std::unordered_set<std::string>* queued, FsckReport* r) {
  const std::string& volume = meta->format().name;
  const uint32_t bs = meta->format().block_size;
  auto chunks = meta->ListChunks(ino);
  if (!chunks.ok()) {
    r->problems.push_back({"missing-object", path, "cannot list chunks: " + chunks.status().message()});
    return;
  }
  for (uint32_t idx : *chunks) {
    auto recs = meta->ReadChunk(ino, idx);
    if (!recs.ok()) {
      r->problems.push_back({"damaged-record", path, recs.status().message()});
      continue;
    }
    for (const ChunkSegment& s : BuildSliceMap(std::move(*recs))) {
      if (s.id == 0) continue;
      if (s.pack != 0) {
        // A packed small file: its pack must exist, and hold its range.
        if (static_cast<uint64_t>(s.pack_off) + s.size > s.pack_len) {
          r->problems.push_back({"bad-object-size", path,
                                 "slice " + std::to_string(s.id) + " is recorded past the end of pack " +
                                     std::to_string(s.pack)});
          continue;
        }
        std::string key = PackKey(volume, s.pack, s.pack_len);
        if (queued->insert(key).second) checker->Check(std::move(key), s.pack_len, path);
        continue;
      }
      for (const BlockSpan& span : BlockSpans(s.size, bs, s.off, s.len)) {
        uint32_t len = BlockLength(s.size, bs, span.index);
        std::string key = BlockKey(volume, s.id, span.index, len);
        if (!queued->insert(key).second) continue;
        checker->Check(std::move(key), len, path);
      }
    }
  }
}

}  // namespace

Result<FsckReport> CheckVolume(Meta* meta, ObjectStore* store, const FsckOptions& opts) {
  FsckReport r;
  Ctx root = Ctx::Root();
  auto say = [&](const std::string& m) {
    if (opts.progress) opts.progress(m);
  };
  // Resolve the starting directory.
  Ino start = kRootIno;
  std::string start_path = "/";
  {
    std::string rest = opts.path;
    size_t pos = 0;
    while (pos < rest.size()) {
      size_t slash = rest.find('/', pos);
      std::string part = rest.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      if (!part.empty() && part != ".") {
        auto e = meta->Lookup(root, start, part);
        if (!e.ok()) return e.status().With("resolving --path " + opts.path);
        start = e->first;
        start_path = Join(start_path, part);
      }
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
  }
  const bool whole = start == kRootIno;

  std::unordered_map<Ino, uint32_t> links, subdirs;
  std::unordered_map<Ino, Attr> attrs;
  std::unordered_map<Ino, std::string> paths;
  std::unordered_set<Ino> reported_attrs;  // damaged-inode problems already listed
  std::unordered_set<std::string> queued_objects;
  ObjectChecker checker(meta, store, opts);
  std::deque<Ino> queue{start};
  auto sa = meta->GetAttr(start);
  if (!sa.ok()) return sa.status();
  attrs[start] = *sa;
  paths[start] = start_path;
  if (!sa->IsDir()) return Status::Err(ENOTDIR, start_path + " is not a directory");
  if (whole) {
    // The trash is a tree of its own, found by name from the root.
    auto trash = meta->GetAttr(kTrashIno);
    if (trash.ok()) {
      queue.push_back(kTrashIno);
      attrs[kTrashIno] = *trash;
      paths[kTrashIno] = "/.trash";
    }
  }

  while (!queue.empty()) {
    Ino dir = queue.front();
    queue.pop_front();
    r.dirs++;
    const std::string dir_path = paths[dir];
    std::vector<DamagedRecord> damaged;
    auto entries = meta->Readdir(root, dir, true, &damaged);
    if (!entries.ok()) {
      r.problems.push_back({"dangling-entry", dir_path, "cannot list: " + entries.status().message()});
      continue;
    }
    // Damaged entries (left out of the listing) go; inodes whose attributes are damaged
    // stay (only their owner knows what they were) and are reported.
    std::unordered_set<Ino> damaged_attrs;
    for (const DamagedRecord& d : damaged) {
      std::string_view name;
      if (d.key.size() > 9 && d.key[9] == 'I') {
        damaged_attrs.insert(keys::DecodeU64(std::string_view(d.key).substr(1, 8)));
      } else if (keys::ParseDentryName(d.key, &name)) {
        FsckProblem prob{"damaged-entry", Join(dir_path, keys::Quote(name)), d.what + ", key " + keys::Hex(d.key)};
        if (opts.repair) prob.repaired = meta->RepairRemoveEntry(dir, std::string(name)).ok();
        r.problems.push_back(prob);
      }
    }
    for (const DirEntry& e : *entries) {
      std::string p = Join(dir_path, e.name);
      if (e.attr.mode == 0 && damaged_attrs.count(e.ino)) {
        r.problems.push_back({"damaged-inode", p,
                              "the attributes of inode " + std::to_string(e.ino) + " cannot be decoded (key " +
                                  keys::Hex(keys::Inode(e.ino)) + "); restore the file from a backup"});
        reported_attrs.insert(e.ino);
        continue;
      }
      if (e.attr.mode == 0) {
        FsckProblem prob{"dangling-entry", p, "entry points at inode " + std::to_string(e.ino) + ", which does not exist"};
        if (opts.repair) prob.repaired = meta->RepairRemoveEntry(dir, e.name).ok();
        r.problems.push_back(prob);
        continue;
      }
      if ((e.attr.mode & S_IFMT) != e.type) {
        r.problems.push_back({"type-mismatch", p, "entry says type " + std::to_string(e.type >> 12) +
                                                      ", inode has " + std::to_string((e.attr.mode & S_IFMT) >> 12)});
      }
      links[e.ino]++;
      bool first = attrs.emplace(e.ino, e.attr).second;
      if (first) paths[e.ino] = p;
      if (e.attr.IsDir()) {
        subdirs[dir]++;
        if (first) queue.push_back(e.ino);
      } else if (first) {
        if (e.attr.IsRegular()) {
          r.files++;
          if (opts.check_objects) CheckFileData(meta, &checker, e.ino, p, &queued_objects, &r);
        } else {
          r.others++;
        }
      }
      if ((r.files + r.dirs + r.others) % 10000 == 0) {
        say("checked " + std::to_string(r.files + r.dirs + r.others) + " inodes, " +
            std::to_string(checker.Checked()) + " objects");
      }
    }
  }

  say("waiting for the last object checks");
  checker.Finish(&r);

  // Link counts: directories always (their count depends only on their children); files
  // only over the whole volume, where every link was seen.
  for (auto& [ino, a] : attrs) {
    uint32_t want;
    if (a.IsDir()) {
      want = 2 + subdirs[ino];
    } else if (whole) {
      want = links[ino];
    } else {
      continue;
    }
    if (a.nlink != want) {
      FsckProblem prob{"link-count", paths[ino],
                       "link count " + std::to_string(a.nlink) + ", entries say " + std::to_string(want)};
      if (opts.repair) prob.repaired = meta->RepairLinkCount(ino, want).ok();
      r.problems.push_back(prob);
    }
  }

  // Inodes nothing points at (open-but-unlinked files have no links and are fine), and the
  // usage counters (`df`, `status`) against what the inodes hold: every linked inode and
  // every unlinked one a session still holds open counts, with its length (4 KiB units).
  if (whole) {
    ASSIGN_OR_RETURN(std::set<Ino> held, meta->SustainedInodes());
    uint64_t used = 0, inodes = 0;
    std::vector<DamagedRecord> damaged;
    RETURN_IF_ERROR(meta->ForEachInode([&](Ino ino, const Attr& a) {
      // The trash and its hour directories are bookkeeping, not counted; its entries are.
      const bool trash_dir = ino == kTrashIno || a.parent == kTrashIno;
      if ((a.nlink > 0 || held.count(ino)) && !trash_dir) {
        inodes++;
        if (a.IsRegular()) used += (a.length + 4095) / 4096 * 4096;
      }
      if (a.nlink == 0 || attrs.count(ino)) return;
      r.problems.push_back({"orphan", "<inode " + std::to_string(ino) + ">",
                            "inode with " + std::to_string(a.nlink) + " links is in no directory"});
    }, &damaged));
    for (const DamagedRecord& d : damaged) {
      Ino ino = keys::DecodeU64(std::string_view(d.key).substr(1, 8));
      if (reported_attrs.count(ino)) continue;
      r.problems.push_back({"damaged-inode", "<inode " + std::to_string(ino) + ">",
                            d.what + " (key " + keys::Hex(d.key) + "); no entry leads to it"});
    }
    ASSIGN_OR_RETURN(StatFs fs, meta->GetStatFs());
    if (fs.used_bytes != used || fs.inodes != inodes) {
      FsckProblem prob{"usage-counter", "/",
                       "usage counters say " + std::to_string(fs.used_bytes) + " bytes in " +
                           std::to_string(fs.inodes) + " inodes; the inodes hold " + std::to_string(used) +
                           " bytes in " + std::to_string(inodes)};
      if (opts.repair) prob.repaired = meta->RepairUsage(used, inodes).ok();
      r.problems.push_back(prob);
    }
  }
  // The change log: every record kept must decode, and they must follow each other (a gap
  // would make its readers miss a change).
  ASSIGN_OR_RETURN(ChangeLogBounds log, ChangeLogRange(meta->engine()));
  uint64_t expect = log.first;
  Status read = ReadChanges(meta->engine(), log.first, 0, [&](const ChangeRecord& c) {
    if (c.seq != expect) {
      r.problems.push_back({"change-log-gap", "<change log>",
                            "records " + std::to_string(expect) + " to " + std::to_string(c.seq - 1) + " are missing"});
    }
    expect = c.seq + 1;
    return true;
  });
  if (!read.ok()) r.problems.push_back({"damaged-record", "<change log>", read.message()});
  // Its registered readers (mirrors): each must still find the records it has not read.
  auto readers = ReadChangeConsumers(meta->engine());
  if (!readers.ok()) {
    r.problems.push_back({"damaged-record", "<change log readers>", readers.status().message()});
  } else {
    for (const ChangeConsumer& c : *readers) {
      if (c.applied < log.last && c.applied + 1 < log.first) {
        r.problems.push_back({"change-log-reader-lost", "<change log readers>",
                              c.name + " holds commit " + std::to_string(c.applied) + " but the log begins at " +
                                  std::to_string(log.first) + ": re-seed it (`tierfs mirror ... --reseed`) or forget "
                                  "it (`tierfs changelog META-URL --drop-consumer " + c.name + "`)"});
      }
    }
  }
  return r;
}

}  // namespace tierfs
