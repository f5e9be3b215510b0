// A POSIX tree (directory or volume) listed as one stream of keys in byte order.
//
// A directory's children come from the side in name order (DirStream); a subdirectory's
// key is its name with '/' appended, which can move it behind names that share its
// prefix ("a" the directory is "a/", after the file "a.txt", before "a0"). The lister
// holds directories back until the names passed their key, then walks each one depth
// first. Memory: one DirStream per level of the current path (what it buffers: a page
// of a volume's directory, or a local directory's sorted names), plus the held-back
// directories of each level (those whose names prefix the names that follow them).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "sync/side.h"

namespace tierfs::sync {

class DirStream {
 public:
  virtual ~DirStream() = default;
  // The next child into *e, its key being only its name (no '/' for directories).
  virtual Result<bool> Next(Entry* e) = 0;
};

// Opens directory dir_key ("" the root, "a/b/" below it).
using OpenDir = std::function<Result<std::unique_ptr<DirStream>>(const std::string& dir_key)>;

// Keys >= start; a directory for which descend says false is listed but not walked.
std::unique_ptr<KeyStream> ListTree(OpenDir open, std::string start, Descend descend);

}  // namespace tierfs::sync
