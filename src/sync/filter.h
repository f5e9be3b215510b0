// Which keys a sync run considers, by rsync's rules (`--include`, `--exclude`), with the
// same order of evaluation: the rules are tried in the order given on the command line and
// the first whose pattern matches decides; a key no rule matches is included. A pattern
// ending in '/' matches only directories; one starting with '/' is anchored at the root of
// the transfer; one containing '/' or "**" is matched against the whole path below the root
// (at any directory boundary when it is not anchored), any other against the last name
// only. '*' matches anything but '/', "**" anything, '?' one character but '/', "[...]" a
// class ("[!...]" or "[^...]" negated), '\' quotes the next character; "DIR/***" matches DIR
// and everything below it. An excluded directory excludes everything below it: rsync does
// not descend into it, and the syncer checks each key's directories on object stores,
// which have no directories to skip.
#pragma once

#include <string>
#include <vector>

namespace tierfs::sync {

class Filter {
 public:
  void Add(bool include, const std::string& pattern);
  bool empty() const { return rules_.empty(); }
  // The rules in order, one per line ("+ /pattern/"), for a run's identity.
  std::string Describe() const;
  // path: a key without its trailing '/'; is_dir: whether it names a directory.
  bool Included(const std::string& path, bool is_dir) const;
  // A key and all its directories (object-store keys, whose directories were not walked).
  bool IncludedWithParents(const std::string& key) const;

 private:
  struct Rule {
    bool include;
    std::string pattern;  // without a leading '/' or a trailing '/'
    bool anchored, dir_only, whole_path;
  };
  bool Matches(const Rule& r, const std::string& path, bool is_dir) const;
  std::vector<Rule> rules_;
};

// The glob matcher the rules use (exposed for the unit test).
bool GlobMatch(const char* pattern, const char* text);

}  // namespace tierfs::sync
