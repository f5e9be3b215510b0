// FileStore: objects as regular files under a root directory (the "bucket").
//
// Key "a/b/c" is stored at ROOT/a/b/c. A Put writes the whole object to a temporary file
// in the target directory and renames it into place, so a reader sees either no object or
// the complete one, never a partial one. Temporary files are named ".tmp.<basename>.<hex>"
// and are never listed. Multipart uploads are emulated with one file per part under
// ROOT/.multipart/<upload-id>/<n> and concatenated by CompleteMultipart.
//
// Keys must be relative '/'-separated paths without empty, "." or ".." components; a
// component may not start with ".tmp." and the first component may not be ".multipart"
// (both are reserved for the store itself). Other keys are rejected with EINVAL. Because
// keys map to paths, the store cannot hold both "a" and "a/b".
//
// Durability: with FileStoreOptions::fsync (what volumes use unless mounted with
// --no-sync-blocks) each object and its directory entry are fsynced before Put returns;
// without it objects stay in the page cache until Sync() or the kernel writes them back.
//
// Privacy: objects are created 0600 and directories 0700 (the umask can only narrow them),
// so a bucket is readable only by the user running tierfs, as the disk cache is. Init
// creates a missing root 0700 (missing parents as mkdir -p does) and makes the directory
// of FileStoreOptions::private_dir and the multipart area 0700 when an earlier version
// left them open to other users (their files may still be 0644, but nobody else can
// reach them through a 0700 directory).
//
// Threads: every method may be called from any thread concurrently. Several processes
// may share one root directory.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_set>

#include "object/object_store.h"

namespace tierfs {

struct FileStoreOptions {
  // fsync every object (and its directory) before Put/CompleteMultipart returns.
  bool fsync = false;
  // A top-level directory holding this store's objects (the volume's name): Init creates
  // it 0700 or takes group and other access away from it. Empty: none.
  std::string private_dir{};
  // The share of the bucket's file system kept free: a Put (or part) that would leave less
  // fails with ENOSPC before the disk fills (the host's other users keep their room, and
  // the trash cannot fill it). 0: none. Space() reports the room above it.
  double min_free_ratio = 0;
};

class FileStore : public ObjectStore {
 public:
  // root is the bucket directory and should be absolute; trailing slashes are ignored.
  explicit FileStore(std::string root, FileStoreOptions options = {});
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  std::string Describe() const override;
  // mkdir -p the root (0700), makes options.private_dir and .multipart private (see
  // above), then proves the root writable by creating and removing a probe file.
  Status Init() override;
  // syncfs() of the file system holding the bucket: one call covers every object written;
  // callers arriving while one runs share the next. Nothing to do with options.fsync.
  Status Sync() override;
  // statvfs of the bucket directory: the file system holding it.
  std::optional<StoreSpace> Space() const override;
  Status Put(const std::string& key, std::string_view data) override;
  Status PutParts(const std::string& key, const std::vector<std::string_view>& parts) override;
  Result<std::string> Get(const std::string& key, uint64_t off = 0, int64_t len = -1) override;
  Result<ObjectInfo> Head(const std::string& key) override;
  Status Delete(const std::string& key) override;
  // Walks the directory tree (pruned by prefix and start_after); meant for gc, not hot
  // paths. limit 0 means no limit.
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override;

  // Parts are numbered 1..parts; re-uploading a part replaces it.
  Result<std::string> CreateMultipart(const std::string& key) override;
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override;
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override;
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override;

 private:
  struct ListState;

  std::string PathOf(const std::string& key) const;
  // ENOSPC when writing `bytes` would leave less than options_.min_free_ratio of the disk free.
  Status CheckRoom(const std::string& key, uint64_t bytes) const;
  std::string UploadDir(const std::string& upload_id) const;
  // The helpers below return errno values (0 = success) so that callers can phrase the
  // error for their own operation.
  // mkdir -p dir, consulting and filling the cache of directories known to exist.
  int MakeDirs(const std::string& dir, mode_t mode = 0700);
  void ForgetDirs();
  // Creates dir 0700 or takes group and other permissions from it (logged); never fails
  // the store: a directory it cannot change is logged as a warning.
  void MakePrivate(const std::string& dir);
  // Opens a new temporary file in path's directory; returns the fd or -errno.
  // create_dirs=false makes a missing directory an ENOENT error.
  int CreateTemp(const std::string& path, bool create_dirs, std::string* tmp);
  // Closes fd (fsyncing first if configured) and renames tmp onto path; removes tmp on
  // failure.
  int CommitTemp(int fd, const std::string& tmp, const std::string& path);
  // Writes data to a temporary file next to path and renames it onto path.
  int WriteAtomic(const std::string& path, const std::vector<std::string_view>& parts, bool create_dirs);
  Status WalkDir(const std::string& rel_dir, ListState* state);
  Status RemoveUploadDir(const std::string& dir);
  // Maps errno to the store's error codes: ENOSPC/EDQUOT -> ENOSPC, EACCES/EPERM/EROFS ->
  // EACCES, anything else -> EIO; the message names the key and the bucket.
  Status IoError(const std::string& what, const std::string& key, int err) const;

  std::string root_;  // without trailing '/'; "" for the file system root
  FileStoreOptions options_;
  std::atomic<bool> in_memory_{false};  // the bucket is on tmpfs/ramfs (found by Init)
  bool SyncPuts() const { return options_.fsync && !in_memory_; }
  Status SyncNow();
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  uint64_t sync_requested_ = 0, sync_done_ = 0;  // guarded by sync_mu_
  bool sync_running_ = false;
  std::mutex dirs_mu_;
  std::unordered_set<std::string> known_dirs_;  // guarded by dirs_mu_
};

}  // namespace tierfs
