// PassthroughOpens: the daemon's side of the kernel's one-io-mode-per-inode rule
// (fuse/kernel_passthrough.h), for one mount.
//
// The invariant: an inode is never answered a passthrough open while this mount has a
// caching-mode open of it, and never a caching-mode open while it has a passthrough one;
// all passthrough opens of an inode use one backing id. Every open of a file counts here
// from before its reply is sent until its RELEASE arrives. The kernel drops its own count
// at close, before it sends RELEASE, so this count is never below the kernel's: a
// passthrough open this table allows can never meet a caching open in the kernel, which
// would fail the caller's open(2) with EIO.
//
// A caching open (a write, or a read of a file without a ready copy) that finds passthrough
// opens waits up to kConflictWait for them to end (a RELEASE is often still on its way
// right after a close), then fails with ETXTBSY: a file being read through passthrough on
// this host cannot be written through this host until its readers close it. Counted in
// tierfs_passthrough_conflicts_total and logged.
//
// Threads: any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "meta/types.h"

namespace tierfs::fuse_internal {

class PassthroughOpens {
 public:
  static constexpr std::chrono::milliseconds kConflictWait{2000};

  // dev_fd: the FUSE device, for the backing ioctls. Off until Enable.
  // How backing files are registered with the kernel (fuse/kernel_passthrough.h; tests
  // pass their own): open returns the id (> 0) or a negative errno.
  struct Backing {
    std::function<int(int dev_fd, int fd)> open;
    std::function<void(int dev_fd, int id)> close;
  };
  // The ids still registered at the end go with the connection (the device may be closed
  // by then: they are not closed here).
  explicit PassthroughOpens(int dev_fd);
  PassthroughOpens(int dev_fd, Backing backing) : dev_fd_(dev_fd), backing_(std::move(backing)) {}

  // Before the session is served: whether passthrough opens are tried at all.
  void Enable(bool on) { enabled_ = tracking_ = on; }
  bool enabled() const { return enabled_; }

  // A caching-mode open of ino is about to be answered: counts it and returns true, unless
  // ino has passthrough opens (then false, nothing counted: see WaitBeginCached).
  bool TryBeginCached(Ino ino);
  // Waits (at most kConflictWait) until ino has no passthrough opens, then counts the
  // caching open. false: they did not end in time; answer ETXTBSY. Blocks: call it from a
  // waiter thread, never a FUSE worker (the RELEASEs it waits for need the workers).
  bool WaitBeginCached(Ino ino);
  // Tries a passthrough open of ino through handle fh, onto the copy `name` at `path`
  // (path may be empty: then only an inode already open onto `name` can share it).
  // Returns the backing id for the reply, or 0: answer in caching mode (BeginCached).
  int BeginPassthrough(Ino ino, uint64_t fh, const std::string& name, const std::string& path);
  // The handle was released (or its open's reply failed).
  void End(Ino ino, uint64_t fh);

 private:
  struct Modes {
    int cached = 0;
    int passthrough = 0;
    int backing_id = 0;
    std::string name;  // the copy the passthrough opens read
  };

  const int dev_fd_;
  const Backing backing_;
  std::atomic<bool> enabled_{false};  // new passthrough opens are tried
  bool tracking_ = false;  // opens are counted (set once, before serving; stays on after a fallback)
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Ino, Modes> inodes_;                  // guarded by mu_; only inodes with opens
  std::map<uint64_t, Ino> passthrough_handles_;  // guarded by mu_
};

}  // namespace tierfs::fuse_internal
