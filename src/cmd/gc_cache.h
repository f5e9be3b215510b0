// `tierfs gc --cache`: the folders of volumes in local disk cache directories, and removing
// the ones nobody used for a while (chunk/cache_folders.h has the rules that keep staged
// writes and folders in use).
#pragma once

#include <cstdint>
#include <string>

namespace tierfs::cmd {

struct CacheGcArgs {
  std::string cache_dir;         // DIR[:DIR...]; empty: the default cache directory
  std::string keep_uuid;         // the volume of the META-URL given, if any: always kept
  int64_t unused_ns = 0;         // folders unused for this long go (with remove)
  std::string unused_text;       // as given, for the report
  bool remove = false, json = false;
};

// Reports every volume folder with what it holds and its fate; removes with args.remove.
// Returns the exit code (1 when a removal failed for another reason than the rules).
int RunCacheGc(const CacheGcArgs& args);

}  // namespace tierfs::cmd
