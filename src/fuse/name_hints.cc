#include "fuse/name_hints.h"

#include <mutex>
#include <unordered_map>
#include <utility>

namespace tierfs::fuse_internal {

namespace {

struct Table {
  std::mutex mu;
  std::unordered_map<Ino, std::pair<Ino, std::string>> names;
};

Table& T() {
  static Table* t = new Table;  // never destroyed: FUSE threads may outlive static destructors
  return *t;
}

}  // namespace

void NoteName(Ino ino, Ino parent, std::string_view name) {
  if (ino == 0 || name.empty() || name == "." || name == "..") return;
  Table& t = T();
  std::lock_guard<std::mutex> l(t.mu);
  auto it = t.names.find(ino);
  if (it != t.names.end()) {
    if (it->second.first != parent || it->second.second != name) it->second = {parent, std::string(name)};
    return;
  }
  if (t.names.size() >= kMaxNameHints) t.names.clear();
  t.names.emplace(ino, std::make_pair(parent, std::string(name)));
}

bool FindName(Ino ino, Ino* parent, std::string* name) {
  Table& t = T();
  std::lock_guard<std::mutex> l(t.mu);
  auto it = t.names.find(ino);
  if (it == t.names.end()) return false;
  *parent = it->second.first;
  *name = it->second.second;
  return true;
}

}  // namespace tierfs::fuse_internal
