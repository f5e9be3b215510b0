#include "meta/change_watch.h"

#include <string_view>

#include "meta/key_schema.h"
#include "meta/kv_engine.h"

namespace tierfs {

std::vector<MetaChange> MetaChangesOfKeys(const std::vector<std::string>& keys) {
  std::vector<MetaChange> out;
  for (const auto& key : keys) {
    Ino ino;
    char kind;
    std::string_view rest;
    if (!keys::ParseInodeKey(key, &ino, &kind, &rest)) continue;
    switch (kind) {
      case 'I':  // attributes
      case 'X':  // xattrs: ACLs, which the kernel caches with the inode
        if (!out.empty() && out.back().kind == MetaChange::kAttr && out.back().ino == ino) break;
        out.push_back(MetaChange{MetaChange::kAttr, ino, 0, ""});
        break;
      case 'D':
        if (!rest.empty()) out.push_back(MetaChange{MetaChange::kEntry, 0, ino, std::string(rest)});
        break;
      default:  // chunks, truncation rules, locks, symlink targets: not cached by the kernel
        break;
    }
  }
  return out;
}

Status WatchMetaChanges(KvEngine* engine, MetaChangeFn fn) {
  return engine->Watch([fn = std::move(fn)](const std::vector<std::string>& keys, bool all) {
    if (all) {
      fn({}, true);
      return;
    }
    auto changes = MetaChangesOfKeys(keys);
    if (!changes.empty()) fn(changes, false);
  });
}

void StopWatchingMetaChanges(KvEngine* engine) { (void)engine->Watch(nullptr); }

}  // namespace tierfs
