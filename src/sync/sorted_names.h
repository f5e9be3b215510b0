// The names of one directory in byte order, with memory bounded however large it is.
//
// readdir returns a directory's names in no order, and a sync side must list them sorted
// (side.h). The local directory side used to hold every entry of a directory (name and
// stat, about 150 bytes each) to sort them: 1.5 GB for 10 million. SortedNames keeps at
// most kRunNames names in memory: past that, each full batch is sorted and appended to one
// unnamed temporary file ($TMPDIR, else /tmp; gone when closed, even after SIGKILL) as a
// sorted run of NUL-terminated names (a name never holds NUL), and Next merges the runs.
//
// Memory: up to kRunNames names while adding (about 3 MiB of short names), then one
// kReadBuffer buffer per run while merging (16 KiB per 65,536 names: 2.5 MiB for 10
// million). Disk: the names themselves, once. A directory of kRunNames names or fewer
// never touches the disk.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs::sync {

class SortedNames {
 public:
  static constexpr size_t kRunNames = 65536;
  static constexpr size_t kReadBuffer = 16384;

  // run_names: how many names to sort in memory before spilling (tests make it small).
  explicit SortedNames(size_t run_names = kRunNames);
  ~SortedNames();
  SortedNames(const SortedNames&) = delete;
  SortedNames& operator=(const SortedNames&) = delete;

  // Adds a name (any bytes but NUL). Errors: the temporary file cannot be made or written.
  Status Add(std::string name);
  // Ends adding; Next then returns every name added, in byte order (duplicates kept).
  Status Finish();
  // The next name into *name: true, false at the end.
  Result<bool> Next(std::string* name);

  size_t runs() const { return runs_.size(); }  // spilled runs (0: all in memory)

 private:
  struct Run;
  // std::*_heap keep the greatest first: a min-heap on names orders by "greater".
  static bool RunAfter(const Run* a, const Run* b);
  Status Spill();

  size_t run_names_;
  std::vector<std::string> batch_;
  size_t batch_pos_ = 0;  // when nothing spilled: the next name of the sorted batch
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<std::unique_ptr<Run>> runs_;
  std::vector<Run*> heap_;  // runs with a current name, a min-heap on it
  bool finished_ = false;
};

}  // namespace tierfs::sync
