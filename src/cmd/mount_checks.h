// Checks of `tierfs mount` options made before anything is opened: FUSE options libfuse would
// refuse without saying which, and combinations that contradict each other or do nothing.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs::cmd {

// Splits -o values ("a,b", "c") into single options; ro and rw are taken out (*read_only
// is set by ro), the rest are for FUSE. The access-time options (atime, relatime,
// strictatime, noatime) also go to *atime when given: libfuse does not know the first three,
// so they are taken out; noatime stays for FUSE as well.
std::vector<std::string> SplitMountOptions(const std::vector<std::string>& o_values, bool* read_only,
                                           std::vector<std::string>* atime = nullptr);

// The -o options left for FUSE (after tierfs took ro and rw): EINVAL naming the first one
// neither libfuse nor the kernel's FUSE mount knows (libfuse itself only says "invalid
// argument" for the whole list).
Status CheckFuseOptions(const std::vector<std::string>& options);

// What a mount was asked for, as far as the combinations below care.
struct MountChoices {
  bool read_only = false;        // --read-only or -o ro
  bool writeback = false;        // --writeback
  bool pack_below = false;       // --pack-below given
  bool upload_delay = false;     // --upload-delay given
  bool cache_in_memory = false;  // --cache-dir memory or --cache-size 0
  bool cache_writes = false;     // --cache-writes
  bool cache_group = false;      // --cache-group given
  bool group_addr = false;       // --group-addr given
  bool no_sharing = false;       // --no-sharing
};

// EINVAL naming the options that contradict each other or that do nothing in this
// combination, and what to do instead.
Status CheckMountChoices(const MountChoices& c);

}  // namespace tierfs::cmd
