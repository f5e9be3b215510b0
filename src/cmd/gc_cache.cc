// tierfs gc --cache [META-URL] [--cache-dir DIR[:DIR...]] [--unused 30d] [--delete] [--json]
#include "cmd/gc_cache.h"

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "chunk/cache_folders.h"
#include "cmd/client_options.h"
#include "cmd/util.h"
#include "common/clock.h"
#include "common/size.h"

namespace tierfs::cmd {
namespace {

std::string Day(int64_t ns) {
  time_t t = static_cast<time_t>(ns / 1000000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

}  // namespace

int RunCacheGc(const CacheGcArgs& a) {
  const std::vector<std::string> dirs = SplitDirs(a.cache_dir.empty() ? DefaultCacheDir() : a.cache_dir);
  const int64_t now = NowNanos();
  nlohmann::json out = nlohmann::json::array();
  uint64_t removed = 0, removed_bytes = 0, kept = 0, would = 0;
  int rc = 0;
  for (const CacheFolder& f : ListCacheFolders(dirs, true)) {
    std::string action = "kept", why;
    const int64_t idle = now - f.last_used_ns;
    if (f.uuid == a.keep_uuid) {
      why = "the volume of META-URL";
    } else if (f.in_use) {
      why = "in use by a running mount";
    } else if (f.staged_files > 0) {
      why = "holds " + std::to_string(f.staged_files) + " staged files of written data not uploaded yet (not cache; "
            "`tierfs upload-staged META-URL " + f.dir + "` uploads them)";
    } else if (idle < a.unused_ns) {
      why = "used within --unused " + a.unused_text;
    } else if (!a.remove) {
      action = "would remove";
      would++;
      why = "unused for " + std::to_string(idle / kDayNs) + " days; --delete removes it";
    } else {
      Status st = RemoveCacheFolder(f.dir, f.uuid);
      if (st.ok()) {
        action = "removed";
        why = "unused for " + std::to_string(idle / kDayNs) + " days";
        removed++;
        removed_bytes += f.bytes;
      } else {
        why = st.message();
        if (st.code() != EBUSY && st.code() != ENOTEMPTY && st.code() != ENOENT) rc = 1;
      }
    }
    if (action == "kept") kept++;
    if (a.json) {
      out.push_back({{"dir", f.dir}, {"uuid", f.uuid}, {"bytes", f.bytes}, {"last_used", f.last_used_ns / 1000000000},
                     {"in_use", f.in_use}, {"staged_files", f.staged_files}, {"action", action}, {"why", why}});
    } else {
      std::cout << f.path() << "  " << FormatSize(f.bytes) << ", last used " << Day(f.last_used_ns) << " UTC: " << action
                << " (" << why << ")\n";
    }
  }
  if (a.json) {
    std::cout << nlohmann::json{{"folders", out}, {"removed", removed}, {"removed_bytes", removed_bytes}}.dump(2)
              << std::endl;
  } else {
    std::cout << (a.remove ? "removed " : "would remove ") << (a.remove ? removed : would) << " folders";
    if (a.remove) std::cout << " (" << FormatSize(removed_bytes) << ")";
    std::cout << ", kept " << kept << "; staged writes and folders in use are never removed\n";
  }
  return rc;
}

}  // namespace tierfs::cmd
