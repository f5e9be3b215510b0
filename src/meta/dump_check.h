// Validation of a whole dump document before `tierfs load` writes anything (meta_dump.cc):
// every field of every record has the type and range the file system writes (the record
// checks of meta/record_check.h, plus what only the whole document shows: every entry
// leads to an inode of the type it says, names are unique in their directory, a
// directory's parent exists, link counts are possible). Private to meta_dump.cc.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace tierfs::internal {

// EINVAL naming the first bad record ("the dump is damaged: inode 12: ...; nothing was
// loaded"), else OK.
Status CheckDumpDocument(const nlohmann::json& doc);

}  // namespace tierfs::internal
