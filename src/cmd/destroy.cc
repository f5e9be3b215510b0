// tierfs destroy META-URL UUID [--yes] [--threads 16]: deletes a whole volume, every object
// it has in the object store (the VOLUME/ prefix: blocks, packs, metadata backups), then
// all of its metadata. The UUID must be the volume's, no client may be mounted (a live
// session: a heartbeat younger than the session timeout), and on a terminal the volume's
// name must be typed unless --yes. Before deleting, the volume is marked (Meta::
// MarkDestroying): no client can mount it from then on, so none starts while the objects
// go. Objects go first, so an interrupted destroy can be run again; the metadata goes last,
// in one reset of the engine. The objects go only when this engine owns them (tools/
// bucket_owner.h): a copy made by `tierfs load` is erased with --keep-objects, which leaves
// the objects to their owner. Then the volume's folders in this host's cache directories go
// (not one in use or holding staged writes; not for a copy, whose UUID is the original's).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "chunk/cache_folders.h"
#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "client/metrics_setup.h"
#include "cmd/util.h"
#include "common/clock.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/bucket_owner.h"

namespace tierfs::cmd {
namespace {

// Deletes every object under prefix, a listed page at a time, `threads` deletions at once.
Status DeleteAll(ObjectStore* store, const std::string& prefix, int threads, bool tty, uint64_t* deleted) {
  std::string after;
  for (;;) {
    ASSIGN_OR_RETURN(auto page, store->List(prefix, after, 1000));
    if (page.empty()) break;
    after = page.back().key;
    std::atomic<size_t> next{0};
    std::mutex mu;
    Status first;
    auto work = [&] {
      for (size_t i = next++; i < page.size(); i = next++) {
        Status s = store->Delete(page[i].key);
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (first.ok()) first = s;
        }
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < std::min<int>(threads, static_cast<int>(page.size())); ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (!first.ok()) return first;
    *deleted += page.size();
    if (tty) std::cerr << "\rdeleted " << *deleted << " objects" << std::flush;
  }
  if (tty) std::cerr << "\n";
  return Status::OK();
}

// A file store keeps the volume's objects in directories: the emptied ones go too.
void RemoveEmptyDirs(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) RemoveEmptyDirs(e.path());
  }
  std::filesystem::remove(dir, ec);  // only when empty
}

// Exit code 1 with the live clients named, or 0 when there are none.
int RefuseLiveClients(Meta* meta, const FormatRecord& fmt) {
  auto sessions = meta->ListSessions();
  if (!sessions.ok()) return Fail("destroy", sessions.status());
  const int64_t now = NowNanos(), timeout = int64_t{fmt.session_timeout_s} * 1000000000;
  std::string live;
  int n_live = 0;
  for (const SessionInfo& s : *sessions) {
    if (s.heartbeat_ns == 0 || now - s.heartbeat_ns >= timeout) continue;  // dead (not cleaned up yet)
    n_live++;
    live += "\n  session " + std::to_string(s.sid) + ": " + s.host + " pid " + std::to_string(s.pid) +
            (s.mountpoint.empty() ? std::string(" (cache server)") : " on " + s.mountpoint);
  }
  if (n_live > 0) {
    return Fail("destroy", Status::Err(EBUSY, "volume " + fmt.name + " is in use by " + std::to_string(n_live) +
                                                  " live client(s); unmount them first; nothing deleted:" + live));
  }
  return 0;
}

// The volume's folders in this host's cache directories (CACHE-DIR/UUID): removed, except
// one a running process uses or whose staging area holds written data (never removed
// automatically: chunk/cache_folders.h). Other hosts' caches are theirs to clean (`tierfs
// gc --cache`).
void RemoveLocalCacheFolders(const std::string& cache_dir, const std::string& uuid) {
  for (const std::string& dir : SplitDirs(cache_dir.empty() ? DefaultCacheDir() : cache_dir)) {
    Status st = RemoveCacheFolder(dir, uuid);
    if (st.ok()) {
      std::cout << "removed the volume's cache folder " << dir << "/" << uuid << "\n";
    } else if (st.code() != ENOENT) {
      std::cerr << "tierfs: destroy: the volume's cache folder was not removed: " << st.message() << std::endl;
    }
  }
}

int Run(const std::string& meta_url, const std::string& uuid, bool yes, bool keep_objects, int threads,
        const std::string& metrics, const std::string& cache_dir) {
  auto meta = OpenVolume(meta_url, true);
  if (!meta.ok()) return Fail("destroy", meta.status());
  const FormatRecord fmt = (*meta)->format();
  if (uuid != fmt.uuid) {
    return Fail("destroy", Status::Err(EINVAL, "UUID " + uuid + " is not the UUID of volume " + fmt.name +
                                                   " (see `tierfs status " + meta_url + "`); nothing deleted"));
  }
  if (int rc = RefuseLiveClients(meta->get(), fmt); rc != 0) return rc;
  const std::string where = fmt.storage + " " + fmt.bucket;
  if (!yes) {
    if (!isatty(STDIN_FILENO)) {
      return Fail("destroy", Status::Err(EINVAL, "not on a terminal: give --yes to destroy volume " + fmt.name +
                                                     " without confirmation; nothing deleted"));
    }
    std::cerr << "This deletes volume " << fmt.name << " (" << fmt.uuid << "): "
              << (keep_objects ? std::string() : "every object under " + fmt.name + "/ in " + where + " and ")
              << "all metadata at " << meta_url << ". It cannot be undone.\n"
              << "Type the volume's name to confirm: " << std::flush;
    std::string typed;
    std::getline(std::cin, typed);
    if (typed != fmt.name) return Fail("destroy", Status::Err(ECANCELED, "not confirmed; nothing deleted"));
  }
  auto store = OpenStore(fmt);
  if (!store.ok()) return Fail("destroy", store.status());
  if (!keep_objects) {
    BucketOwner other;
    auto own = CheckBucketOwner((*meta)->engine(), store->get(), fmt, /*claim=*/false, &other);
    if (!own.ok()) return Fail("destroy", own.status().With("nothing deleted"));
    if (*own == Ownership::kOther) {
      return Fail("destroy", NotOwner(other, fmt, meta_url, "deleting the objects")
                                 .With("nothing deleted; `tierfs destroy --keep-objects` erases only this copy's "
                                       "metadata"));
    }
  }
  auto exporter = StartCommandMetrics(metrics, fmt.name, "destroy");
  if (!exporter.ok()) return Fail("destroy", exporter.status().With("--metrics; nothing deleted"));
  // From here on no client may start (the mark), and one that started since the first look
  // is caught by the second.
  Status marked = (*meta)->MarkDestroying(true);
  if (!marked.ok()) return Fail("destroy", marked.With("marking the volume; nothing deleted"));
  if (int rc = RefuseLiveClients(meta->get(), fmt); rc != 0) {
    Status st = (*meta)->MarkDestroying(false);
    if (!st.ok()) Fail("destroy", st.With("taking the destroy mark back (clients cannot mount until it goes)"));
    return rc;
  }
  uint64_t deleted = 0;
  Status st = keep_objects ? Status::OK() : DeleteAll(store->get(), fmt.name + "/", threads, isatty(STDERR_FILENO), &deleted);
  if (!st.ok()) {
    return Fail("destroy", st.With("deleting the objects (" + std::to_string(deleted) +
                                   " deleted; the metadata is kept, run destroy again)"));
  }
  if (fmt.storage == "file") RemoveEmptyDirs(fmt.bucket + "/" + fmt.name);
  KvEngine* engine = (*meta)->engine();
  st = engine->Reset();
  if (!st.ok()) return Fail("destroy", st.With("erasing the metadata (the objects are deleted)"));
  if (keep_objects) {
    std::cout << "destroyed volume " << fmt.name << " (" << fmt.uuid << ") in " << meta_url
              << ": metadata erased, objects left in " << where << "\n";
    return 0;
  }
  std::cout << "destroyed volume " << fmt.name << " (" << fmt.uuid << "): " << deleted << " objects deleted from "
            << where << ", metadata erased\n";
  RemoveLocalCacheFolders(cache_dir, fmt.uuid);
  return 0;
}

}  // namespace

void RegisterDestroy(CLI::App& app, int* exit_code) {
  auto url = std::make_shared<std::string>();
  auto uuid = std::make_shared<std::string>();
  auto yes = std::make_shared<bool>(false);
  auto keep_objects = std::make_shared<bool>(false);
  auto threads = std::make_shared<int>(16);
  auto metrics = std::make_shared<std::string>();
  auto cache_dir = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("destroy", "Delete a whole volume: its objects in the store and all its metadata");
  sub->add_option("META-URL", *url, "Metadata engine of the volume")->required();
  sub->add_option("UUID", *uuid, "The volume's UUID (tierfs status), as a check")->required();
  sub->add_flag("--yes", *yes, "Do not ask for confirmation (which needs a terminal)");
  sub->add_flag("--keep-objects", *keep_objects,
                "Erase only the metadata and leave the objects (a copy made by `tierfs load`, whose objects belong "
                "to the engine it came from)");
  sub->add_option("--threads", *threads, "Concurrent object deletions")->capture_default_str()->check(CLI::Range(1, 256));
  sub->add_option("--cache-dir", *cache_dir,
                  "This host's cache directories DIR[:DIR...] whose folder of the volume goes too (default: the "
                  "default --cache-dir of mounts)");
  AddCommandMetricsOption(sub, metrics.get());
  sub->callback([=] { *exit_code = Run(*url, *uuid, *yes, *keep_objects, *threads, *metrics, *cache_dir); });
}

}  // namespace tierfs::cmd
