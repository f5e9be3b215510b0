#define FUSE_USE_VERSION 312
#include "fuse/uring_queues.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include "metrics/metrics.h"

namespace tierfs::fuse_internal {
namespace {

// Wire formats newer than Debian 12's <linux/fuse.h> (protocol 7.42).
constexpr size_t kInOutSize = 128;
constexpr size_t kOpInSize = 128;
struct EntInOut {  // struct fuse_uring_ent_in_out
  uint64_t flags;
  uint64_t commit_id;
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
struct RingHeader {  // struct fuse_uring_req_header
  char in_out[kInOutSize];
  char op_in[kOpInSize];
  EntInOut ent;
};
struct CmdReq {  // struct fuse_uring_cmd_req, in the SQE's command area
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
constexpr uint32_t kCmdRegister = 1;
constexpr uint32_t kCmdCommitAndFetch = 2;

constexpr size_t kPayloadOffset = 4096;  // room before the payload to rebuild a request
static_assert(sizeof(RingHeader) + sizeof(fuse_in_header) + kOpInSize <= kPayloadOffset);
constexpr uint64_t kWakeTag = 1;
// Entries a queue may grow to while requests are parked on other threads (blocking locks).
constexpr size_t kMaxEntries = 1024;  // user_data of the eventfd poll (entries are pointers)

metrics::Counter& Requests() {
  static metrics::Counter& c = metrics::Default().GetCounter(
      "tierfs_fuse_uring_requests_total", "FUSE requests delivered through io_uring queues (mount --io-uring)");
  return c;
}

thread_local void* tl_queue = nullptr;  // the queue whose thread this is

}  // namespace

struct UringQueues::Entry {
  Queue* queue = nullptr;
  char* mem = nullptr;  // RingHeader at 0, payload at kPayloadOffset
  iovec iov[2];
  uint64_t commit_id = 0;
  bool parked = false;  // its handler returned before replying (a waiter thread holds it)
  RingHeader* header() { return reinterpret_cast<RingHeader*>(mem); }
  char* payload() { return mem + kPayloadOffset; }
};

// One thread's share of a queue: its ring, its entries (registered on the queue qid).
struct UringQueues::Queue {
  uint16_t qid = 0;
  int index = 0;  // of the queue's threads
  io_uring ring;
  bool ring_ok = false;
  int wake_fd = -1;
  std::deque<Entry> entries;  // grows (never shrinks) while requests are parked
  size_t parked = 0;          // entries whose request waits on another thread
  bool warned_full = false;
  std::thread thread;
  std::mutex mu;
  std::vector<Entry*> foreign;  // replied from other threads, to commit; guarded by mu
};

UringQueues::UringQueues(fuse_session* se, RawHandler raw, int threads, int depth)
    : se_(se),
      dev_fd_(fuse_session_fd(se)),
      raw_(std::move(raw)),
      threads_(threads < 1 ? 1 : threads),
      depth_(depth < 1 ? 1 : depth) {}

UringQueues::~UringQueues() {
  Stop();
  for (auto& q : queues_) {
    if (q->ring_ok) io_uring_queue_exit(&q->ring);
    if (q->wake_fd >= 0) close(q->wake_fd);
    for (Entry& e : q->entries) free(e.mem);
  }
}

void UringQueues::Start(size_t payload_size) {
  if (!queues_.empty()) return;
  payload_size_ = payload_size;
  const int n = get_nprocs_conf();  // the kernel keeps one queue per possible CPU
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < threads_; ++t) {
      auto q = std::make_unique<Queue>();
      q->qid = static_cast<uint16_t>(i);
      q->index = t;
      for (int j = 0; j < depth_; ++j) NewEntry(q.get());
      queues_.push_back(std::move(q));
    }
  }
  for (auto& q : queues_) q->thread = std::thread(&UringQueues::Serve, this, q.get());
  spdlog::info("FUSE over io_uring: {} queues, {} threads of {} entries each, {} KiB payload each", n, threads_,
               depth_, payload_size >> 10);
}

UringQueues::Entry* UringQueues::NewEntry(Queue* q) {
  Entry& e = q->entries.emplace_back();
  e.queue = q;
  // The payload's pages are touched only as far as requests and replies fill them.
  e.mem = static_cast<char*>(aligned_alloc(4096, kPayloadOffset + payload_size_));
  if (e.mem) memset(e.mem, 0, sizeof(RingHeader));
  e.iov[0] = {e.mem, sizeof(RingHeader)};
  e.iov[1] = {e.mem ? e.mem + kPayloadOffset : nullptr, payload_size_};
  return &e;
}

void UringQueues::Stop() {
  if (stop_.exchange(true)) return;
  for (auto& q : queues_) {
    if (q->wake_fd >= 0) eventfd_write(q->wake_fd, 1);
  }
  for (auto& q : queues_) {
    if (q->thread.joinable()) q->thread.join();
  }
}

void UringQueues::PrepCommand(Queue* q, Entry* e, uint32_t op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&q->ring);
  if (!sqe) {  // cannot happen (one SQE per entry at most, plus the poll), but never drop one
    io_uring_submit(&q->ring);
    sqe = io_uring_get_sqe(&q->ring);
    if (!sqe) {
      spdlog::error("FUSE io_uring queue {}: no submission slot; an entry is lost", q->qid);
      return;
    }
  }
  memset(sqe, 0, 128);  // a 128-byte SQE (IORING_SETUP_SQE128)
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = 0;  // the registered /dev/fuse
  sqe->flags = IOSQE_FIXED_FILE;
  sqe->cmd_op = op;
  auto* req = reinterpret_cast<CmdReq*>(sqe->cmd);
  req->qid = q->qid;
  req->commit_id = e->commit_id;
  if (op == kCmdRegister) {
    sqe->addr = reinterpret_cast<uint64_t>(e->iov);
    sqe->len = 2;
  }
  sqe->user_data = reinterpret_cast<uint64_t>(e);
}

namespace {

void ArmWake(io_uring* ring, int fd) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (!sqe) {
    io_uring_submit(ring);
    sqe = io_uring_get_sqe(ring);
    if (!sqe) return;
  }
  io_uring_prep_poll_add(sqe, fd, POLLIN);
  sqe->user_data = kWakeTag;
}

}  // namespace

void UringQueues::Serve(Queue* q) {
  char name[32];
  snprintf(name, sizeof name, "fuse-uring-%u.%d", static_cast<unsigned>(q->qid % 1000), q->index % 100);
  name[15] = 0;  // the kernel's limit for thread names
  pthread_setname_np(pthread_self(), name);
  tl_queue = q;
  for (Entry& e : q->entries) {
    if (!e.mem) {
      spdlog::error("FUSE io_uring queue {}: out of memory for its buffers", q->qid);
      return;
    }
  }
  io_uring_params params;
  memset(&params, 0, sizeof params);
  params.flags = IORING_SETUP_SQE128 | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
                 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_CQSIZE;
  params.cq_entries = 2 * kMaxEntries;  // every entry's completion fits, however many are added
  int rc = io_uring_queue_init_params(static_cast<unsigned>(depth_) + 2, &q->ring, &params);
  if (rc < 0) {
    spdlog::warn("FUSE io_uring queue {}: io_uring_setup failed ({}); requests stay on /dev/fuse", q->qid,
                 strerror(-rc));
    return;
  }
  q->ring_ok = true;
  if (!(params.features & IORING_FEAT_EXT_ARG)) {
    spdlog::warn("FUSE io_uring queue {}: the kernel's io_uring lacks timed waits; requests stay on /dev/fuse",
                 q->qid);
    return;
  }
  int files[1] = {dev_fd_};
  if ((rc = io_uring_register_files(&q->ring, files, 1)) < 0) {
    spdlog::warn("FUSE io_uring queue {}: registering /dev/fuse failed ({})", q->qid, strerror(-rc));
    return;
  }
  q->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (q->wake_fd < 0) {
    spdlog::warn("FUSE io_uring queue {}: eventfd: {}", q->qid, strerror(errno));
    return;
  }
  ArmWake(&q->ring, q->wake_fd);
  for (Entry& e : q->entries) PrepCommand(q, &e, kCmdRegister);
  size_t live = q->entries.size();  // entries the kernel has not ended
  bool registered = false;          // a request came: the queue serves
  while (!stop_.load() && !fuse_session_exited(se_) && live > 0) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{0, 200'000'000};
    rc = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, nullptr);
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY) {
      spdlog::error("FUSE io_uring queue {}: waiting for requests failed ({})", q->qid, strerror(-rc));
      break;
    }
    while (io_uring_peek_cqe(&q->ring, &cqe) == 0) {
      const uint64_t tag = cqe->user_data;
      const int res = cqe->res;
      io_uring_cqe_seen(&q->ring, cqe);
      if (tag == kWakeTag) {
        eventfd_t v;
        eventfd_read(q->wake_fd, &v);
        std::vector<Entry*> replied;
        {
          std::lock_guard<std::mutex> l(q->mu);
          replied.swap(q->foreign);
        }
        for (Entry* e : replied) {
          if (e->parked) {
            e->parked = false;
            --q->parked;
          }
          PrepCommand(q, e, kCmdCommitAndFetch);
        }
        ArmWake(&q->ring, q->wake_fd);
        continue;
      }
      auto* e = reinterpret_cast<Entry*>(tag);
      if (res < 0) {
        // The kernel ended the entry: the connection is gone (ENOTCONN, ECONNABORTED at
        // unmount or abort), or it refused it (EOPNOTSUPP: io_uring not enabled).
        --live;
        if (res != -ENOTCONN && res != -ECONNABORTED && res != -ENODEV && !stop_.load()) {
          spdlog::warn("FUSE io_uring queue {}: the kernel ended an entry ({}){}", q->qid, strerror(-res),
                       registered ? "" : "; requests stay on /dev/fuse");
        }
        continue;
      }
      registered = true;
      Handle(q, e);
      if (e->parked && q->entries.size() - q->parked < 2) {
        // Requests waiting on other threads hold their entries (a blocking lock until the
        // holder lets go); without a free one, the request that ends the wait could never
        // be delivered. Register another.
        if (q->entries.size() < kMaxEntries) {
          Entry* more = NewEntry(q);
          if (more->mem) {
            ++live;
            PrepCommand(q, more, kCmdRegister);
          }
        } else if (!q->warned_full) {
          q->warned_full = true;
          spdlog::warn("FUSE io_uring queue {}: {} requests wait at once (blocking locks); new requests on "
                       "this CPU wait for one to end",
                       q->qid, q->parked);
        }
      }
    }
  }
}

void UringQueues::Handle(Queue* q, Entry* e) {
  RingHeader* h = e->header();
  fuse_in_header in;
  memcpy(&in, h->in_out, sizeof in);
  EntInOut ent;
  memcpy(&ent, &h->ent, sizeof ent);
  e->commit_id = ent.commit_id;
  {
    std::lock_guard<std::mutex> l(mu_);
    in_flight_[in.unique] = e;
  }
  Requests().Add();
  const size_t payload = ent.payload_sz;
  if (in.len < sizeof in + payload || in.len - sizeof in - payload > kOpInSize || payload > payload_size_) {
    spdlog::error("FUSE io_uring queue {}: a request's sizes do not add up (opcode {}, len {}, payload {})", q->qid,
                  in.opcode, in.len, payload);
    fuse_out_header out{sizeof(fuse_out_header), -EIO, in.unique};
    iovec v{&out, sizeof out};
    TakeReply(&v, 1);
    return;
  }
  const size_t op_size = in.len - sizeof in - payload;
  char* start = e->payload() - op_size - sizeof in;
  memcpy(start, &in, sizeof in);
  memcpy(start + sizeof in, h->op_in, op_size);
  RawRequest r{reinterpret_cast<const fuse_in_header*>(start), start + sizeof in, op_size + payload};
  if (!raw_ || !raw_(r)) {
    fuse_buf buf;
    memset(&buf, 0, sizeof buf);
    buf.size = in.len;
    buf.mem = start;
    fuse_session_process_buf(se_, &buf);
  }
  // Not replied yet: another thread holds the request. Its reply comes through the
  // foreign list, which this thread reads only after this returns.
  std::lock_guard<std::mutex> l(mu_);
  auto it = in_flight_.find(in.unique);
  if (it != in_flight_.end() && it->second == e) {
    e->parked = true;
    ++q->parked;
  }
}

ssize_t UringQueues::TakeReply(const iovec* iov, int count) {
  const auto* oh = static_cast<const fuse_out_header*>(iov[0].iov_base);
  Entry* e = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = in_flight_.find(oh->unique);
    if (it == in_flight_.end()) return kNotMine;
    e = it->second;
    in_flight_.erase(it);
  }
  fuse_out_header out = *oh;
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  size_t payload = total - sizeof out;
  if (payload > payload_size_) {
    spdlog::error("FUSE io_uring: a reply of {} bytes exceeds the entry's {} (opcode reply to {}); EIO", payload,
                  payload_size_, out.unique);
    out.error = -EIO;
    payload = 0;
  } else {
    char* dst = e->payload();
    size_t skip = sizeof out;
    for (int i = 0; i < count; ++i) {
      const char* src = static_cast<const char*>(iov[i].iov_base);
      size_t len = iov[i].iov_len;
      size_t s = skip < len ? skip : len;
      skip -= s;
      memcpy(dst, src + s, len - s);
      dst += len - s;
    }
  }
  out.len = static_cast<uint32_t>(sizeof out + payload);
  memcpy(e->header()->in_out, &out, sizeof out);
  e->header()->ent.payload_sz = static_cast<uint32_t>(payload);
  Commit(e);
  return static_cast<ssize_t>(total);
}

void UringQueues::Commit(Entry* e) {
  Queue* q = e->queue;
  if (tl_queue == q) {  // the queue's own thread: submitted with its next wait
    PrepCommand(q, e, kCmdCommitAndFetch);
    return;
  }
  {
    std::lock_guard<std::mutex> l(q->mu);
    q->foreign.push_back(e);
  }
  eventfd_write(q->wake_fd, 1);
}

}  // namespace tierfs::fuse_internal
