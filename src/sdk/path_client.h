// A volume by path, for front ends that have no kernel to resolve names for them: the
// Python SDK (python/) first. It opens a client::Volume (the engine, the store, the caches
// and the write path a mount uses) and offers what os.* offers, path by path, as the
// calling process's user: its uid, gid, supplementary groups and umask, read when the
// client is opened, so permissions are checked as a mount would check them.
//
// Paths: "/"-separated, relative ones taken from the volume's root (or --subdir's); "." and
// ".." are followed by name (".." of the root is the root). Symbolic links in the middle of
// a path are followed, and at its end unless `follow` is false, at most 40 (then ELOOP). A
// link's absolute target is taken inside the volume: the SDK has no other tree to point
// into, so "/data/x" means the volume's /data/x, as it does through a mount at "/".
//
// Errors are Status with an errno (ENOENT, EACCES, ENOTDIR, ...) and a message that names
// the path; the Python layer raises them as OSError subclasses.
//
// Threads: every call may come from any thread at once (the Vfs's contract). Handles are
// numbers the Vfs gave out; Close releases one exactly once.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/volume.h"
#include "common/status.h"
#include "meta/meta.h"
#include "meta/quota_tx.h"

namespace tierfs::sdk {

struct Stat {
  Ino ino = 0;
  Attr attr;
};

struct Listed {
  std::string name;
  Ino ino = 0;
  uint32_t type = 0;  // S_IFMT bits
};

// An open file: the Vfs's handle and the inode it is of.
struct OpenFile {
  uint64_t fh = 0;
  Ino ino = 0;
};

class PathClient {
 public:
  // Opens the volume (client::Volume::Open), as the calling process's user.
  static Result<std::unique_ptr<PathClient>> Connect(const client::VolumeOptions& options);
  ~PathClient();

  // Commits what is buffered and shuts the volume down (client::Volume::Close). Safe twice;
  // every later call fails with EBADF.
  void Close();
  bool closed() const { return volume_ == nullptr; }

  // The volume's format record as JSON with its secrets hidden (what `tierfs status`
  // shows under "format").
  std::string FormatJson() const;

  Result<Stat> GetStat(const std::string& path, bool follow = true);
  Status Access(const std::string& path, int mask);
  Result<std::vector<Listed>> List(const std::string& path);
  Status Mkdir(const std::string& path, uint32_t mode);
  Status Rmdir(const std::string& path);
  Status Unlink(const std::string& path);
  // flags: RENAME_NOREPLACE, RENAME_EXCHANGE (0: replace, as rename(2)).
  Status Rename(const std::string& from, const std::string& to, uint32_t flags = 0);
  Status Link(const std::string& existing, const std::string& path);
  Status Symlink(const std::string& target, const std::string& path);
  Result<std::string> Readlink(const std::string& path);
  Status Chmod(const std::string& path, uint32_t mode, bool follow = true);
  // -1 leaves the id as it is (os.chown).
  Status Chown(const std::string& path, int64_t uid, int64_t gid, bool follow = true);
  // Times in ns since the epoch; "now" for both when `now` is set (os.utime(path)).
  Status Utime(const std::string& path, int64_t atime_ns, int64_t mtime_ns, bool now, bool follow = true);
  Status Truncate(const std::string& path, uint64_t length);

  Result<std::string> GetXattr(const std::string& path, const std::string& name, bool follow = true);
  Status SetXattr(const std::string& path, const std::string& name, const std::string& value, int flags,
                  bool follow = true);
  Result<std::vector<std::string>> ListXattr(const std::string& path, bool follow = true);
  Status RemoveXattr(const std::string& path, const std::string& name, bool follow = true);

  // A copy of `from` at `to` that shares its blocks (Meta::Clone; `tierfs clone`): no data
  // is read or written. Directories are cloned whole.
  Status Clone(const std::string& from, const std::string& to);
  // Removes a tree (Meta::RemoveTree; `tierfs rmr`): files go to the trash when it is on.
  Status RemoveTree(const std::string& path);
  // The tree's size, files and directories as JSON (the tierfs.summary xattr; `tierfs summary`).
  Result<std::string> Summary(const std::string& path);
  // Reads a file's or tree's blocks into the caches (the tierfs.warmup xattr).
  Result<std::string> Warmup(const std::string& path);
  // Free and used space and inodes of the volume (statvfs).
  Result<StatFs> StatVolume();

  // Quotas (`tierfs quota`; meta/quota_tx.h): a directory's, named by its path, or a
  // user's or group's, named by the id. Reading is open to everyone; setting and deleting
  // to root only (EPERM), since the client acts as the calling user. nullopt limits are
  // left as they are; 0 removes a limit.
  Result<std::optional<Quota>> GetQuota(QuotaKind kind, const std::string& path, uint64_t id);
  Status SetQuota(QuotaKind kind, const std::string& path, uint64_t id, std::optional<int64_t> max_bytes,
                  std::optional<int64_t> max_inodes);
  Status DeleteQuota(QuotaKind kind, const std::string& path, uint64_t id);
  // Every quota, directory quotas with the path of their directory (or "<inode N>").
  Result<std::vector<std::pair<Quota, std::string>>> ListQuotas();

  // open(2), except that a directory fails with EISDIR (as Python's open() does): flags
  // O_RDONLY/O_WRONLY/O_RDWR with O_CREAT, O_EXCL, O_TRUNC, O_APPEND; mode for a new file
  // (the umask applies). Returns the handle for Read/Write/Close.
  Result<OpenFile> Open(const std::string& path, int flags, uint32_t mode);
  Result<size_t> Read(uint64_t fh, uint64_t off, size_t size, char* buf);
  Status Write(uint64_t fh, uint64_t off, const char* data, size_t size);
  // A write of an O_APPEND handle: at the end of the file as this client sees it (its own
  // buffered writes included). Appends through this client to one file never interleave or
  // overwrite each other, whatever the handle or thread; another client's appends may (as
  // between two mounts: its writes reach this one at its close, close-to-open). Returns the
  // offset written at.
  Result<uint64_t> Append(const OpenFile& f, const char* data, size_t size);
  // Commits the handle's writes so that other clients see them (close-to-open).
  Status Flush(uint64_t fh);
  Status Fsync(uint64_t fh);
  Result<Attr> HandleStat(const OpenFile& f);
  Status HandleTruncate(const OpenFile& f, uint64_t length);
  // Flush, then release: the error of either (a failed commit is reported here, as close(2)).
  Status Close(uint64_t fh);

 private:
  PathClient(std::unique_ptr<client::Volume> volume, Ctx ctx);
  // The parent directory of `path` and the last name in it (EINVAL for the root itself and
  // for a last name of "." or "..", which no call that needs a name can take).
  Status ResolveParent(const std::string& path, Ino* parent, std::string* name);
  Result<Entry> Resolve(const std::string& path, bool follow);
  // A trailing slash names a directory (path_resolution(7)): a walk follows a last link and
  // wants a directory there, and the calls that take a last name check it as Linux does.
  static bool Slashed(const std::string& path);
  // The error with the path it was about, as os.* names it.
  static Status On(const Status& st, const std::string& path);
  // EACCES, EPERM or EROFS: a permission refused (which Linux reports after some others).
  static bool Denied(const Status& st);
  // The order of errors Linux gives (path_client_errors.cc).
  // What Linux says of a new name before the call that makes it: EEXIST when it exists
  // (asked only when `check`, or for a name with a trailing slash: otherwise the call
  // itself says EEXIST), ENOENT for an absent one with a trailing slash.
  Status NewName(Ino parent, const std::string& name, const std::string& path, bool check);
  // The result of a call that makes `name` in `parent`, except that a name that exists says
  // EEXIST rather than the call's EACCES, EPERM or EROFS (Linux looks the name up first).
  Status ExistsFirst(Ino parent, const std::string& name, const std::string& path, Status st);
  // The result of a call that removes `name` from `parent`, except that an absent name says
  // ENOENT rather than the call's EACCES, EPERM or EROFS.
  Status MissingFirst(Ino parent, const std::string& name, const std::string& path, Status st);
  // What rename(2) says when the engine's rename failed with st (path_client_errors.cc).
  Status RenameError(Ino p1, const std::string& n1, Ino p2, const std::string& n2, const std::string& what,
                     Status st);
  // Whether directory `dir` is `ino` or holds it, however deep (walking up by "..").
  bool Holds(Ino dir, Ino ino);
  // Drops the set-user-ID and set-group-ID bits of a regular file as the kernel does after
  // a write or truncation by a caller other than root, or after a change of owner or group
  // (owner_changed: whoever asks). kill_priv.cc says the rules. `known` (the attributes a
  // lookup just read) spares reading them again when they carry no set-ID bit.
  Status KillPriv(Ino ino, bool owner_changed, const Attr* known = nullptr);
  // Handles opened on a set-ID file by a caller other than root: their first write drops
  // the bits (KillPriv) rather than every write asking for the file's mode.
  void KillOnWrite(uint64_t fh, Ino ino, const Attr& a);
  Ino TakeKillOnWrite(uint64_t fh);  // 0: nothing to drop
  Result<Entry> Walk(Ino dir, const std::string& path, bool follow, int* links);
  Result<std::vector<DirEntry>> ReadDir(Ino dir);
  // The id a quota call names: a directory's inode for kDir, else `id`.
  Result<uint64_t> QuotaId(QuotaKind kind, const std::string& path, uint64_t id);

  // Every call holds it shared; Close holds it alone, so no call runs on a closed volume.
  mutable std::shared_mutex mu_;
  // Append holds the one of its inode (ino % size): choosing the end and writing there is
  // one step for every thread of this client.
  std::array<std::mutex, 16> append_mu_;
  std::mutex kill_mu_;
  std::unordered_map<uint64_t, Ino> kill_on_write_;  // handle -> inode; guarded by kill_mu_
  std::unique_ptr<client::Volume> volume_;
  Ctx ctx_;
};

}  // namespace tierfs::sdk
