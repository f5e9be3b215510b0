// A POSIX tree (directory or volume) listed as one stream of keys in byte order.
//
// A directory's children come from the side in name order (DirStream); a subdirectory's
// key is its name with '/' appended, which can move it behind names that share its
// prefix ("a" the directory is "a/", after the file "a.txt", before "a0"). The lister
// holds directories back until the names passed their key, then walks each one depth
// first. Memory: one DirStream per level of the current path (what it buffers: a page
// of a volume's directory, or a local directory's sorted names), plus the held-back
// directories of each level: those whose key ("a/") is not yet below the last name read
// (a directory "a" waits while names such as "a.txt" or "a-1" follow it, never longer).
// With listing threads, also the directories read ahead (ListTree).
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

// Opens directory dir_key ("" the root, "a/b/" below it): all its entries, or only those
// named (sorted by name) when names is set.
using OpenDir = std::function<Result<std::unique_ptr<DirStream>>(const std::string& dir_key, const NameList& names)>;

// Keys >= start; a directory for which descend says false is listed but not walked.
// children (optional) says which entries of each directory walked to list (side.h).
// threads > 1: that many threads open directories ahead of the walk and read their first
// 1000 entries (at most 4 directories per thread read ahead and not yet walked, so the
// memory stays bounded); open is then called from those threads. The stream is the same.
std::unique_ptr<KeyStream> ListTree(OpenDir open, std::string start, Descend descend, int threads = 1,
                                    Children children = nullptr);

}  // namespace tierfs::sync
