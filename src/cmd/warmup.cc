// tierfs warmup PATH... [--threads N] [--evict | --check | --cache-group] [--json]: fills the client's cache
// with files or directory trees of a mounted volume (or drops them, or reports how much is
// cached). The mount does the work, per file, through the "tierfs.warmup", "tierfs.evict"
// and "tierfs.cache" virtual xattrs (vfs/vfs_cache.cc).
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cmd/commands.h"
#include "cmd/util.h"
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

void Progress(const Totals& t, size_t total, bool final) {
  if (!isatty(STDERR_FILENO) && !final) return;
  size_t done = t.files.load();
  int width = 30;
  int fill = total ? static_cast<int>(done * width / total) : width;
  std::cerr << "\r[" << std::string(fill, '=') << std::string(width - fill, ' ') << "] " << done << "/" << total
            << " files, " << FormatSize(t.bytes.load()) << (final ? "\n" : "") << std::flush;
}

int Run(const std::vector<std::string>& paths, int threads, bool evict, bool check, bool json, bool group) {
  const char* name = evict ? "tierfs.evict" : check ? "tierfs.cache" : group ? "tierfs.warmup.group" : "tierfs.warmup";
  std::vector<std::string> files;
  Status listed = RegularFilesUnder(paths, &files);
  if (!listed.ok()) return Fail("warmup", listed);
  // Fail early and clearly when the first path is not in a mount.
  if (!files.empty()) {
    auto probe = Ask(files.front(), "tierfs.cache");
    if (!probe.ok()) return Fail("warmup", probe.status());
  }
  Totals t;
  std::atomic<size_t> next{0};
  std::mutex err_mu;
  std::string first_error;
  auto start = std::chrono::steady_clock::now();
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      auto r = Ask(files[i], name);
      if (!r.ok()) {
        t.failed++;
        std::lock_guard<std::mutex> l(err_mu);
        if (first_error.empty()) first_error = r.status().ToString();
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
      t.files++;
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < std::max(1, threads); ++i) pool.emplace_back(work);
  while (t.files.load() < files.size()) {
    Progress(t, files.size(), false);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& th : pool) th.join();
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
    Progress(t, files.size(), true);
    uint64_t bytes = t.bytes.load(), cached = t.cached_bytes.load();
    std::cout << files.size() << " files, " << t.blocks.load() << " blocks, " << FormatSize(bytes) << "\n";
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
