// Creating a volume (`tierfs format`, tierfs.format in Python): checks the settings, makes
// the object store's bucket, writes the format record and the root, claims the bucket for
// this engine, and sets the volume's limits. A format that fails leaves no new SQLite
// database file behind (a file that was there before is never touched).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "meta/meta.h"

namespace tierfs::client {

struct FormatOptions {
  std::string meta_url, name, storage = "file", bucket, block_size = "4M";
  // Empty: TIERFS_ACCESS_KEY / TIERFS_SECRET_KEY (or _FILE) from the environment.
  std::string access_key, secret_key, session_token, ceph_conf;
  int session_timeout = 60;
  int trash_days = 1;
  int changelog_hours = 0;
  std::string capacity, inodes;  // empty: no limit
  int format_version = kFormatVersion;
  bool force = false;  // erase a volume already in meta_url
};

struct Formatted {
  FormatRecord record;  // secrets redacted
  std::string meta, data;  // what the engine and the store describe themselves as
  // Set when the bucket held objects of another volume of the same name: the new volume's
  // blocks get other keys, and `tierfs gc --delete` removes the old ones.
  std::string warning;
};

Result<Formatted> FormatVolume(const FormatOptions& options);

// The database file of a sqlite3:// META-URL that format or load may create. If it did not
// exist when this object was made, RemoveIfCreated() deletes it and its -wal, -shm and
// -journal files (call it once the engine is closed), so that a command that failed
// leaves nothing behind. A file that existed before is never touched; other URLs need
// nothing.
class NewDatabaseFile {
 public:
  explicit NewDatabaseFile(const std::string& meta_url);
  void RemoveIfCreated();

 private:
  std::string path_;  // empty: not a sqlite3:// URL, or the file existed
};

// Fills the credential fields of rec from the options (empty = not given), falling back to
// TIERFS_ACCESS_KEY / TIERFS_SECRET_KEY (and _FILE); checks that s3 has both keys.
Status ResolveStorageCredentials(const std::string& access_key, const std::string& secret_key,
                                 const std::string& session_token, const std::string& ceph_conf, FormatRecord* rec);
// --capacity SIZE and --inodes N of format and config (empty: not given; 0: no limit).
Status ParseVolumeLimits(const std::string& capacity, const std::string& inodes, std::optional<int64_t>* cap,
                         std::optional<int64_t>* n);

}  // namespace tierfs::client
