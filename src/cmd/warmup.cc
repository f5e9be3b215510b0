// tierfs warmup PATH... [--threads N] [--evict | --check | --cache-group] [--json]: fills the client's cache
// with files or directory trees of a mounted volume (or drops them, or reports how much is
// cached). The mount does the work, per file, through the "tierfs.warmup", "tierfs.evict"
// and "tierfs.cache" virtual xattrs (vfs/vfs_cache.cc); the trees are walked as they are
// worked on (common/dir_walk.h), with bounded memory at any depth.
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/dir_walk.h"
#include "common/size.h"

namespace tierfs::cmd {
namespace {

struct Totals {
  std::atomic<uint64_t> files{0}, blocks{0}, bytes{0}, fetched_blocks{0}, fetched_bytes{0}, cached_blocks{0},
      cached_bytes{0}, evicted_blocks{0}, owner_blocks{0}, failed{0};
};

Result<nlohmann::json> Ask(const std::string& path, const char* name) {
  ASSIGN_OR_RETURN(std::string text, AskMount(path, name));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Err(EIO, path + ": the mount returned malformed data");
  return j;
}

void Progress(const Totals& t, uint64_t found, bool walking, bool final) {
  if (!isatty(STDERR_FILENO) && !final) return;
  std::cerr << "\r" << t.files.load() << "/" << found << (walking ? "+" : "") << " files, "
            << FormatSize(t.bytes.load()) << (final ? "\n" : "") << std::flush;
}

// Files from the walk to the workers: a bounded queue, so that a tree of any size costs
// the memory of `cap` names (and the directories they are in), not of the whole listing.
class FileQueue {
 public:
  explicit FileQueue(size_t cap) : cap_(cap) {}
  void Push(WalkFile f) {
    std::unique_lock<std::mutex> l(mu_);
    not_full_.wait(l, [&] { return q_.size() < cap_; });
    q_.push_back(std::move(f));
    ++pushed_;
    not_empty_.notify_one();
  }
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    not_empty_.notify_all();
  }
  bool Pop(WalkFile* f) {
    std::unique_lock<std::mutex> l(mu_);
    not_empty_.wait(l, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return false;
    *f = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return true;
  }
  uint64_t pushed() {
    std::lock_guard<std::mutex> l(mu_);
    return pushed_;
  }

 private:
  const size_t cap_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<WalkFile> q_;
  uint64_t pushed_ = 0;
  bool closed_ = false;
};

int Run(const std::vector<std::string>& paths, int threads, bool evict, bool check, bool json, bool group) {
  const char* name = evict ? "tierfs.evict" : check ? "tierfs.cache" : group ? "tierfs.warmup.group" : "tierfs.warmup";
  // Fail early and clearly when a path is missing or the first one is not in a mount.
  for (const std::string& p : paths) {
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) return Fail("warmup", Status::Err(errno, "cannot stat " + p + ": " + strerror(errno)));
  }
  {
    auto probe = Ask(paths.front(), "tierfs.cache");
    if (!probe.ok() && (probe.status().code() == ENOTSUP || probe.status().code() == ENODATA)) {
      return Fail("warmup", probe.status());
    }
  }
  Totals t;
  std::mutex err_mu;
  std::string first_error;
  auto start = std::chrono::steady_clock::now();
  FileQueue queue(static_cast<size_t>(std::max(1, threads)) * 64);
  auto work = [&] {
    WalkFile f;
    while (queue.Pop(&f)) {
      auto r = Ask(f.Path(), name);
      if (!r.ok()) {
        t.failed++;
        std::lock_guard<std::mutex> l(err_mu);
        if (first_error.empty()) first_error = f.Shown() + ": " + r.status().message();
      } else {
        const auto& j = *r;
        t.blocks += j.value("blocks", 0ull);
        t.bytes += j.value("bytes", 0ull);
        t.fetched_blocks += j.value("fetched_blocks", 0ull);
        t.fetched_bytes += j.value("fetched_bytes", 0ull);
        t.cached_blocks += j.value("cached_blocks", 0ull);
        t.cached_bytes += j.value("cached_bytes", 0ull);
        t.evicted_blocks += j.value("evicted_blocks", 0ull);
        t.owner_blocks += j.value("owner_blocks", 0ull);
      }
      f = WalkFile();  // lets its directory close
      t.files++;
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < std::max(1, threads); ++i) pool.emplace_back(work);
  std::atomic<bool> walking{true};
  std::thread progress([&] {
    while (walking.load() || t.files.load() < queue.pushed()) {
      Progress(t, queue.pushed(), walking.load(), false);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  Status walked = WalkRegularFiles(paths, [&](WalkFile f) {
    queue.Push(std::move(f));
    return true;
  });
  queue.Close();
  walking = false;
  for (auto& th : pool) th.join();
  progress.join();
  if (!walked.ok()) return Fail("warmup", walked);
  uint64_t nfiles = t.files.load();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json j = {{"files", t.files.load()},
                      {"failed", t.failed.load()},
                      {"blocks", t.blocks.load()},
                      {"bytes", t.bytes.load()},
                      {"cached_blocks", t.cached_blocks.load()},
                      {"cached_bytes", t.cached_bytes.load()},
                      {"seconds", secs}};
  if (!evict && !check) {
    j["fetched_blocks"] = t.fetched_blocks.load();
    j["fetched_bytes"] = t.fetched_bytes.load();
  }
  if (evict) j["evicted_blocks"] = t.evicted_blocks.load();
  if (group) j["owner_blocks"] = t.owner_blocks.load();
  if (json) {
    std::cout << j.dump(2) << std::endl;
  } else {
    Progress(t, nfiles, false, true);
    uint64_t bytes = t.bytes.load(), cached = t.cached_bytes.load();
    std::cout << nfiles << " files, " << t.blocks.load() << " blocks, " << FormatSize(bytes) << "\n";
    if (evict) {
      std::cout << "evicted " << t.evicted_blocks.load() << " blocks\n";
    } else if (group) {
      std::cout << t.owner_blocks.load() << " blocks sent to their owners in the cache group; "
                << t.blocks.load() - t.owner_blocks.load() << " kept by this member (its own share), of which "
                << t.fetched_blocks.load() << " fetched from the object store in " << secs << " s\n";
    } else if (!check) {
      std::cout << "fetched " << t.fetched_blocks.load() << " blocks (" << FormatSize(t.fetched_bytes.load())
                << ") from the object store in " << secs << " s; " << t.blocks.load() - t.fetched_blocks.load()
                << " were already cached\n";
    }
    std::cout << "cached: " << t.cached_blocks.load() << " blocks, " << FormatSize(cached) << " ("
              << (bytes ? 100.0 * static_cast<double>(cached) / static_cast<double>(bytes) : 100.0) << "%)\n";
  }
  if (t.failed.load() > 0) {
    return Fail("warmup", Status::Err(EIO, std::to_string(t.failed.load()) + " files failed; first: " + first_error));
  }
  return 0;
}

}  // namespace

void RegisterWarmup(CLI::App& app, int* exit_code) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto threads = std::make_shared<int>(8);
  auto evict = std::make_shared<bool>(false);
  auto check = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  auto group = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("warmup", "Fill the client's cache with files or directory trees of a mount");
  sub->add_option("PATH", *paths, "Files or directories in a mounted TierFS volume")->required();
  sub->add_option("--threads", *threads, "Files warmed in parallel")->capture_default_str()->check(CLI::Range(1, 256));
  auto* e = sub->add_flag("--evict", *evict, "Drop the files' blocks from the cache instead");
  auto* c = sub->add_flag("--check", *check, "Only report how much of the files is cached")->excludes(e);
  sub->add_flag("--cache-group", *group,
                "Fill the mount's cache group instead: each block into its owner's cache (the mount's own "
                "share stays here)")
      ->excludes(e)
      ->excludes(c);
  sub->add_flag("--json", *json, "Print the summary as JSON");
  sub->callback([=] { *exit_code = Run(*paths, *threads, *evict, *check, *json, *group); });
}

}  // namespace tierfs::cmd
