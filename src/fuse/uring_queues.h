// FUSE over io_uring (Linux 6.14+; `mount --io-uring`): the kernel hands requests to the
// daemon through io_uring commands instead of read(2) on /dev/fuse, and takes each reply
// together with the daemon's request for the next one (one io_uring_enter for both).
//
// Protocol (the kernel's fuse_uring_cmd, <linux/fuse.h> 7.42; libfuse 3.14 predates it):
//   - one queue per possible CPU; the kernel puts a request on the queue of the CPU its
//     caller runs on, and switches the connection to the queues only once every queue has
//     at least one entry registered. Until then, and for FORGET and INTERRUPT always,
//     requests still come through /dev/fuse (the session loop's workers keep reading it).
//   - an entry is two buffers: a 288-byte header (the fuse_in_header or fuse_out_header,
//     the operation's first argument, and the entry's own fields: commit id, payload
//     size) and a payload buffer as large as the largest request or reply (max_write,
//     max_pages). REGISTER (an IORING_OP_URING_CMD on /dev/fuse with 128-byte SQEs)
//     hands them to the kernel; its completion carries a request. COMMIT_AND_FETCH with
//     the request's commit id hands back the reply and waits for the next request.
//
// Layout of an entry here: the header at offset 0, the payload at 4096. A request is
// rebuilt in place as /dev/fuse would deliver it (fuse_in_header, first argument, rest)
// by writing the first two just before the payload, so that libfuse's dispatch and the
// raw handler read it with no copy of the payload (a WRITE's data stays where the kernel
// put it). The first argument's size is what the header's len leaves after the payload.
//
// Threads: each queue is served by --io-uring-threads threads (default 2), each with its
// own ring and its share of the queue's entries, serving its requests one at a time on
// that thread. The kernel hands a request to any free entry of the queue, so while one
// thread waits (a cold read from the store) the other takes the next. Threads are not
// pinned to their queue's CPU: on a machine with few cores, a handler pinned to the
// caller's CPU competes with the caller while the other cores idle (measured: cached
// reads at half the speed of /dev/fuse's pool; bench/uring.py). A reply sent from
// another thread (a lock waiter, an O_DIRECT write's reply) is handed to the queue's
// thread, which alone submits to its ring, through an eventfd the ring polls.
//
// Entries are not a fixed pool: a request parked on another thread (a blocking lock
// waits there until its holder lets go) keeps its entry, and with every entry of a queue
// so held, the request that would end the wait (the holder's unlock, on the same CPU)
// could never be delivered. A queue left with fewer than two free entries registers
// another (up to 1024; the payload pages are touched only as far as they are filled).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "fuse/session_loop.h"

struct fuse_session;

namespace tierfs::fuse_internal {

class UringQueues {
 public:
  // TakeReply's answer for a reply to a request no queue delivered.
  static constexpr ssize_t kNotMine = -2;

  // threads: per queue, each with its own ring and depth entries (each entry holds one
  // request at a time).
  UringQueues(fuse_session* se, RawHandler raw, int threads, int depth);
  ~UringQueues();  // Stop(), then frees the rings and buffers
  UringQueues(const UringQueues&) = delete;
  UringQueues& operator=(const UringQueues&) = delete;

  // Starts the queues once the INIT reply negotiated io_uring, with payload buffers of
  // payload_size bytes. Returns at once; a queue whose ring cannot be set up or whose
  // registration the kernel refuses logs why and ends, and the kernel then keeps using
  // /dev/fuse for every request.
  void Start(size_t payload_size);
  // The reply to a request (iov[0] starts with its fuse_out_header): committed into the
  // entry that delivered it, returning the bytes taken, or kNotMine.
  ssize_t TakeReply(const iovec* iov, int count);
  // Ends the queues' threads (after the session ended). Idempotent.
  void Stop();

 private:
  struct Entry;
  struct Queue;
  Entry* NewEntry(Queue* q);
  void Serve(Queue* q);
  void Handle(Queue* q, Entry* e);
  void PrepCommand(Queue* q, Entry* e, uint32_t op);
  void Commit(Entry* e);

  fuse_session* const se_;
  const int dev_fd_;
  const RawHandler raw_;
  const int threads_;
  const int depth_;
  size_t payload_size_ = 0;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry*> in_flight_;  // by request id; guarded by mu_
};

}  // namespace tierfs::fuse_internal
