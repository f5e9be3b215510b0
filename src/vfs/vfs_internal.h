// Internal to the vfs files (vfs*.cc): the open handle (the per-inode state it shares is
// in inode_state.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "meta/types.h"
#include "vfs/file_reader.h"
#include "vfs/inode_state.h"

namespace tierfs {

// The kernel asks for security.capability before every write(2).
constexpr const char* kCapsXattr = "security.capability";
constexpr int64_t kNegativeXattrNs = 1'000'000'000;

struct Handle {
  Ino ino = 0;
  int flags = 0;
  bool is_dir = false;
  bool flocked = false;  // took a flock: dropped when the open file description goes
  // Fenced (Vfs::OnSessionLost): the session it was opened in was ended by another client
  // while it held a lock, or its file was unlinked while open; every further use but close
  // fails with EIO.
  std::atomic<bool> lost{false};
  std::shared_ptr<InodeState> state;
  std::unique_ptr<FileReader> reader;  // files only: null for directories
  // directory snapshot
  std::mutex dir_mu;
  bool have_snapshot = false;
  std::vector<DirEntry> entries;
  size_t attrs_until = 0;  // readdirplus: entries before this have their attributes
};

}  // namespace tierfs
