// What a delimited listing page holds directly under its prefix: the shared step of the S3
// and Azure stores' ListLevel. A server that ignored the prefix or the delimiter would
// otherwise put keys of other levels into the level's stream.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "object/object_store.h"

namespace tierfs {

// Moves into `page` the objects directly under `prefix` and the prefixes one level below it.
inline void KeepLevel(const std::string& prefix, std::vector<ObjectInfo>& objects, std::vector<std::string>& prefixes,
                      LevelPage* page) {
  for (ObjectInfo& info : objects) {
    if (info.key.starts_with(prefix) && info.key.find('/', prefix.size()) == std::string::npos) {
      page->objects.push_back(std::move(info));
    }
  }
  for (std::string& p : prefixes) {
    if (p.starts_with(prefix) && p.size() > prefix.size() && p.find('/', prefix.size()) == p.size() - 1) {
      page->prefixes.push_back(std::move(p));
    }
  }
}

}  // namespace tierfs
