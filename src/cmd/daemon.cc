#include "cmd/daemon.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>

#include "cmd/util.h"

namespace tierfs::cmd {

int RunDetached(const std::string& what, const std::string& log_file, const std::string& warning_when_ready,
                const std::function<int(const ReadyFn& ready)>& serve) {
  int fds[2];
  if (pipe(fds) != 0) return Fail(what, Status::Err(errno, "pipe failed"));
  pid_t pid = fork();
  if (pid < 0) return Fail(what, Status::Err(errno, "fork failed"));
  if (pid > 0) {
    close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) {
      msg.append(buf, static_cast<size_t>(n));
      if (msg.find('\n') != std::string::npos) break;
    }
    close(fds[0]);
    if (msg.rfind("OK", 0) == 0) {
      if (!warning_when_ready.empty()) std::cerr << "tierfs: " << what << ": warning: " << warning_when_ready << std::endl;
      return 0;
    }
    if (msg.empty()) {
      int status = 0;
      waitpid(pid, &status, 0);
      return Fail(what, Status::Err(EIO, "the " + what + " process exited before it was ready; see " + log_file));
    }
    if (msg.back() == '\n') msg.pop_back();
    std::cerr << "tierfs: " << what << ": " << msg.substr(4) << std::endl;
    return 1;
  }
  close(fds[0]);
  setsid();
  SetupLogging(log_file, false);
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (devnull > 2) close(devnull);
  }
  // Standard error goes to the log too: what the runtime says as the process dies (a
  // crash report, see common/crash_report.h) must not go to /dev/null.
  int errfd = OpenLogFile(log_file);
  if (errfd >= 0) {
    dup2(errfd, 2);
    close(errfd);
  }
  if (chdir("/") != 0) {
    // Not fatal: the service works from any directory.
  }
  int wfd = fds[1];
  int rc = serve([&](const Status& st) {
    std::string m = st.ok() ? "OK\n" : "ERR " + st.message() + "\n";
    if (wfd >= 0) {
      ssize_t w = write(wfd, m.data(), m.size());
      (void)w;
      close(wfd);
      wfd = -1;
    }
  });
  _exit(rc);
}

}  // namespace tierfs::cmd
