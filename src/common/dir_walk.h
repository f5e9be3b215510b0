// Walks directory trees for commands that act on every file under a path (`tierfs warmup`,
// `tierfs compact`), however deep the tree: iteratively, with directory descriptors
// (openat), never building a path longer than one name, with one directory open at a time
// besides those the caller still holds, and with memory proportional to the names of the
// subdirectories still to visit on the way down (a 10,000-deep chain costs a few hundred
// KiB), not to the depth times the path length.
//
// The walk goes down with openat(parent, name) and back up with openat(child, ".."),
// checking that ".." is the directory it came from (device and inode); a directory moved
// away meanwhile ends that branch with an error naming it. Symbolic links are never
// followed; the regular files are handed to a callback with a descriptor of their
// directory (FilePath gives a short path for calls that only take paths).
//
// Threads: one walk per call; WalkFile (and the descriptor it shares) may be used from any
// thread while the caller holds it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs {

// An open directory of the walk, shared by the files found in it; closed with the last
// reference.
class WalkDir {
 public:
  WalkDir(int fd, std::string shown) : fd_(fd), shown_(std::move(shown)) {}
  ~WalkDir();
  WalkDir(const WalkDir&) = delete;
  WalkDir& operator=(const WalkDir&) = delete;
  int fd() const { return fd_; }
  // Its path for messages; a very long one keeps only its end ("...").
  const std::string& shown() const { return shown_; }

 private:
  int fd_;
  std::string shown_;
};

struct WalkFile {
  std::shared_ptr<WalkDir> dir;  // null for a file given as a path itself
  std::string name;              // the name in dir, or the path given

  // A path that reaches the file through /proc/self/fd, short at any depth (for getxattr
  // and other calls without an *at form); the path itself for a file given as one.
  std::string Path() const;
  // For messages.
  std::string Shown() const;
};

// Calls on_file for every regular file among paths and in the trees of the directories
// among them, depth first. ENOENT for a path that does not exist; a directory that cannot
// be opened or read fails the walk with its error and path. on_file returning false stops
// the walk (OK).
Status WalkRegularFiles(const std::vector<std::string>& paths, const std::function<bool(WalkFile)>& on_file);

}  // namespace tierfs
