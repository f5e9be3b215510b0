#include "cmd/util.h"

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/secret.h"
#include "common/size.h"
#include "common/url.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "meta/timed_engine.h"
#include "object/object_store.h"

namespace tierfs::cmd {

int Fail(const std::string& what, const Status& st) {
  std::cerr << "tierfs: " << what << ": " << st.message() << std::endl;
  return 1;
}

Result<Ino> ResolveVolumePath(Meta* meta, const std::string& path) {
  Ino ino = kRootIno;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (!part.empty() && part != ".") {
      auto e = meta->Lookup(Ctx::Root(), ino, part);
      if (!e.ok()) return e.status().With("no '" + path + "' in the volume");
      ino = e->first;
    }
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return ino;
}

void AddCredentialOptions(CLI::App* sub, std::string* access_key, std::string* secret_key,
                          std::string* session_token, std::string* ceph_conf) {
  sub->add_option("--access-key", *access_key,
                  "s3: access key id; rados: Ceph client name (default client.admin); azure: account name "
                  "(default: the one in the container URL). Default: $TIERFS_ACCESS_KEY");
  sub->add_option("--secret-key", *secret_key,
                  "s3: secret access key; azure: the account key, or sas:TOKEN for a SAS token. Prefer "
                  "$TIERFS_SECRET_KEY or a file named by "
                  "$TIERFS_SECRET_KEY_FILE; it is stored in the volume and never shown");
  sub->add_option("--session-token", *session_token, "s3: session token of temporary credentials");
  sub->add_option("--ceph-conf", *ceph_conf, "rados: path of ceph.conf (default $CEPH_CONF)");
}

namespace {

// Blanks the password in "scheme://user:password@host..." in place.
void ScrubUrlPassword(char* arg) {
  char* sep = strstr(arg, "://");
  if (sep == nullptr) return;
  char* auth = sep + 3;
  char* at = strchr(auth, '@');
  char* slash = strchr(auth, '/');
  if (at == nullptr || (slash != nullptr && slash < at)) return;
  char* colon = static_cast<char*>(memchr(auth, ':', at - auth));
  if (colon == nullptr) return;
  for (char* p = colon + 1; p < at; ++p) *p = 'x';
}

void Blank(char* arg) {
  for (char* p = arg; *p; ++p) *p = 'x';
}

}  // namespace

std::vector<std::string> ScrubSecretsFromArgv(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  static const char* kSecretFlags[] = {"--secret-key", "--session-token"};
  for (int i = 1; i < argc; ++i) {
    ScrubUrlPassword(argv[i]);
    for (const char* flag : kSecretFlags) {
      size_t n = strlen(flag);
      if (strcmp(argv[i], flag) == 0 && i + 1 < argc) {
        Blank(argv[i + 1]);
      } else if (strncmp(argv[i], flag, n) == 0 && argv[i][n] == '=') {
        Blank(argv[i] + n + 1);
      }
    }
  }
  return args;
}

// Mountinfo escapes space, tab, newline and backslash as octal.
static std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() + 1 && i + 3 <= s.size()) {
      out.push_back(static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool IsMountPoint(const std::string& abs_path) {
  std::string target = abs_path;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, devno, root, mnt;
    ls >> id >> parent >> devno >> root >> mnt;
    if (Unescape(mnt) == target) return true;
  }
  return false;
}

int OpenLogFile(const std::string& file) {
  int fd = open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 007) != 0) {
    // An older log, readable by everybody: other users lose access (the group keeps what
    // an administrator gave it). A file of another user that root may not change stays.
    if (fchmod(fd, st.st_mode & 07770) != 0) {
      std::cerr << "tierfs: warning: log file " << file << " is readable by other users and cannot be made "
                << "private: " << strerror(errno) << std::endl;
    }
  }
  return fd;
}

sigset_t BlockStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

void SetupLogging(const std::string& file, bool foreground) {
  try {
    std::shared_ptr<spdlog::logger> logger;
    if (!file.empty()) {
      // Created (or made) private before spdlog opens it with the umask's mode.
      int fd = OpenLogFile(file);
      if (fd >= 0) close(fd);
      logger = spdlog::basic_logger_mt("tierfs", file);
    } else if (foreground) {
      logger = spdlog::stderr_color_mt("tierfs");
    }
    if (logger) {
      logger->flush_on(spdlog::level::warn);
      spdlog::set_default_logger(logger);
    }
    spdlog::flush_every(std::chrono::seconds(1));
  } catch (const spdlog::spdlog_ex& e) {
    std::cerr << "tierfs: cannot open log file " << file << ": " << e.what() << std::endl;
  }
}

Result<std::string> AskMount(const std::string& path, const char* xattr) {
  std::string buf(1 << 16, '\0');
  ssize_t n = getxattr(path.c_str(), xattr, buf.data(), buf.size());
  if (n < 0) {
    int err = errno;
    if (err == ENOTSUP || err == ENODATA) {
      return Status::Err(err, path + " is not in a TierFS mount (" + strerror(err) + ")");
    }
    return Status::Err(err, path + ": " + strerror(err));
  }
  return buf.substr(0, static_cast<size_t>(n));
}

}  // namespace tierfs::cmd
