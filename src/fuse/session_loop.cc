#define FUSE_USE_VERSION 312
#include "fuse/session_loop.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "fuse/session_io.h"

namespace tierfs {
namespace {

// Sent to workers blocked in the device read once the session must end: the read fails
// with EINTR and the worker sees the exit flag.
constexpr int kWakeSignal = SIGUSR2;

struct Pool {
  fuse_session* se;
  const RawHandler* raw;
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;  // guarded by mu
  int error = 0;    // guarded by mu
};

void Worker(Pool* p) {
  pthread_setname_np(pthread_self(), "fuse-worker");
  fuse_buf buf;
  memset(&buf, 0, sizeof buf);
  int error = 0;
  while (!fuse_session_exited(p->se)) {
    int res = fuse_session_receive_buf(p->se, &buf);
    if (res == -EINTR || res == -EAGAIN) continue;
    if (res <= 0) {
      if (res < 0) {
        error = res;
        fuse_session_exit(p->se);
      }
      break;
    }
    if (*p->raw && !(buf.flags & FUSE_BUF_IS_FD) && static_cast<size_t>(res) >= sizeof(fuse_in_header)) {
      const auto* in = static_cast<const fuse_in_header*>(buf.mem);
      RawRequest r{in, static_cast<const char*>(buf.mem) + sizeof *in, static_cast<size_t>(res) - sizeof *in};
      if ((*p->raw)(r)) continue;
    }
    fuse_session_process_buf(p->se, &buf);
  }
  free(buf.mem);
  std::lock_guard<std::mutex> l(p->mu);
  if (error && !p->error) p->error = error;
  --p->running;
  p->cv.notify_all();
}

// Which stop signal ended the session, for the log: libfuse's handlers (installed before
// the loop) still do the stopping; ours, in front of them, only remember the signal.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_stop_signal{0};
struct sigaction g_libfuse_handlers[3];

void NoteStopSignal(int sig) {
  g_stop_signal.store(sig, std::memory_order_relaxed);
  for (int i = 0; i < 3; ++i) {
    if (kStopSignals[i] != sig) continue;
    const auto& h = g_libfuse_handlers[i];
    if (h.sa_handler != SIG_DFL && h.sa_handler != SIG_IGN) h.sa_handler(sig);
  }
}

void InstallStopSignalNotes() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = NoteStopSignal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &sa, &g_libfuse_handlers[i]);
}

void RemoveStopSignalNotes() {
  for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &g_libfuse_handlers[i], nullptr);
}

}  // namespace

int ServeSession(fuse_session* se, int threads, const RawHandler& raw) {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = [](int) {};  // no SA_RESTART: the blocked read returns EINTR
    sigemptyset(&sa.sa_mask);
    sigaction(kWakeSignal, &sa, nullptr);
  });
  g_stop_signal.store(0);
  InstallStopSignalNotes();
  Pool p{se, &raw, {}, {}, 0, 0};
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> l(p.mu);
    p.running = threads;
  }
  for (int i = 0; i < threads; ++i) workers.emplace_back(Worker, &p);
  std::unique_lock<std::mutex> l(p.mu);
  while (p.running > 0) {
    p.cv.wait_for(l, std::chrono::milliseconds(100));
    if (p.running > 0 && fuse_session_exited(se)) {
      // Repeated until every worker is out: a signal that lands just before a worker
      // enters the read does not interrupt it.
      for (auto& w : workers) pthread_kill(w.native_handle(), kWakeSignal);
    }
  }
  l.unlock();
  for (auto& w : workers) w.join();
  RemoveStopSignalNotes();
  // Why the session ended, for whoever reads the log after a mount went away.
  if (int sig = g_stop_signal.load(); sig != 0) {
    spdlog::info("FUSE session ended: got signal {} (SIG{})", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  } else if (p.error != 0) {
    spdlog::error("FUSE session ended: reading the FUSE device failed: {}", strerror(-p.error));
  } else {
    spdlog::info("FUSE session ended: the kernel closed it (unmounted, or aborted through "
                 "/sys/fs/fuse/connections)");
  }
  return p.error;
}

int RawReply(fuse_session* se, uint64_t unique, int error, const std::vector<iovec>& payload) {
  fuse_out_header out;
  out.unique = unique;
  out.error = error;
  std::vector<iovec> iov;
  iov.push_back({&out, sizeof out});
  size_t len = sizeof out;
  if (error == 0) {
    for (const iovec& v : payload) {
      iov.push_back(v);
      len += v.iov_len;
    }
  }
  out.len = static_cast<uint32_t>(len);
  ssize_t n = fuse_internal::SendToKernel(fuse_session_fd(se), iov.data(), static_cast<int>(iov.size()));
  return n < 0 ? -errno : 0;
}

}  // namespace tierfs
