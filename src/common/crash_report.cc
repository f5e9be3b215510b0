// See crash_report.h. The signal handler uses only async-signal-safe calls (write,
// backtrace_symbols_fd, raise); backtrace() is called once at install so that its first
// call, which loads libgcc, does not allocate inside the handler.
#include "common/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>

namespace tierfs {

namespace {

void Say(const char* s) {
  ssize_t n = write(STDERR_FILENO, s, strlen(s));
  (void)n;
}

// Decimal without snprintf (not async-signal-safe).
void SayNumber(long v) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '\0';
  bool neg = v < 0;
  unsigned long u = neg ? 0UL - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (neg) *--p = '-';
  Say(p);
}

void OnFatalSignal(int sig, siginfo_t* info, void*) {
  Say("\ntierfs: fatal signal ");
  SayNumber(sig);
  Say(" (");
  Say(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  Say(") in thread ");
  SayNumber(static_cast<long>(syscall(SYS_gettid)));
  if (sig == SIGSEGV || sig == SIGBUS) {
    Say(" at address 0x");
    char hex[17];
    auto a = reinterpret_cast<unsigned long>(info->si_addr);
    for (int i = 15; i >= 0; --i, a >>= 4) hex[i] = "0123456789abcdef"[a & 15];
    hex[16] = '\0';
    Say(hex);
  }
  Say("; backtrace (resolve with addr2line -e BINARY -f -C):\n");
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND restored the default action: the process dies of this signal.
  raise(sig);
}

void OnTerminate() {
  Say("\ntierfs: terminate called");
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      Say(" after an uncaught exception: ");
      Say(ex.what());
    } catch (...) {
      Say(" after an uncaught exception of unknown type");
    }
  }
  Say("\n");
  std::abort();  // reported by OnFatalSignal with the backtrace
}

}  // namespace

void InstallCrashReport() {
  void* warm[1];
  backtrace(warm, 1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnFatalSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' own reports of these faults say more.
  for (int sig : {SIGABRT}) sigaction(sig, &sa, nullptr);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
#endif
  std::set_terminate(OnTerminate);
}

}  // namespace tierfs
